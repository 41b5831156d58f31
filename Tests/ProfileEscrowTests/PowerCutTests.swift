import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import GRDB
import Logging
import ProfileEscrow
import Testing

/// Power cuts at every sync of a sequence of real commands: captures, erasures, token changes, key rotations and a
/// key cycle, each a `profile-escrow` process on a SQLite store, under a shim that keeps what the disk holds apart
/// from what the page cache holds (scripts/faults/faultshim.c). At the Nth sync (for every N the sequence makes)
/// the power goes off: the command is killed, the folder is put back as the disk holds it, and then every command
/// that had exited 0 must have its effect: acknowledged captures there (or erased by a later acknowledged erase),
/// acknowledged erasures gone, revocations revoked, added tokens there; the keyring whole and able to open every
/// escrow; the audit chain intact; SQLite's integrity check clean.
@Suite("Power cuts at every sync")
struct PowerCutTests {
    enum Step: Sendable, CustomStringConvertible {
        case capture(Int)
        case erase(Int)
        case addToken(String)
        case revoke(String)
        case rotate
        case cycle

        var arguments: [String] {
            switch self {
            case .capture: ["capture"]
            case .erase(let user): ["erase", PowerCutTests.user(user)]
            case .addToken(let name): ["tokens", "add", name, "--scope", "capture"]
            case .revoke(let name): ["tokens", "revoke", name]
            case .rotate: ["keys", "rotate"]
            case .cycle: ["keys", "cycle", "--grace", "0s"]
            }
        }

        var stdin: String {
            guard case .capture(let user) = self else { return "" }
            return #"{"userIdentifier":"\#(PowerCutTests.user(user))","email":"cut\#(user)@example.invalid"}"#
        }

        var description: String { arguments.prefix(3).joined(separator: " ") }
    }

    static let steps: [Step] = [
        .capture(10), .revoke("first"), .capture(11), .erase(0), .rotate, .capture(12), .addToken("fourth"),
        .erase(1), .cycle, .capture(13), .revoke("second"), .erase(10),
    ]

    static func user(_ number: Int) -> String { "000000.cut\(String(format: "%020d", number)).0002" }

    @Test func everyAcknowledgedCommandSurvivesAPowerCutAtEverySync() async throws {
        let scratch = TemporaryDirectory()
        let base = scratch.path + "/base"
        let data = scratch.path + "/data"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        // The store before the sequence: a keyring, three tokens, four escrows (made without the shim).
        let setUp: [Step] = [.capture(0), .capture(1), .capture(2), .capture(3)]
        let baseEnvironment = Self.environment(base)
        _ = try await ProfileEscrowCLI.run(["keys", "init"], environment: baseEnvironment, in: base)
        for name in ["first", "second", "third"] {
            _ = try await ProfileEscrowCLI.run(Step.addToken(name).arguments, environment: baseEnvironment, in: base)
        }
        for step in setUp {
            let result = try await ProfileEscrowCLI.run(
                step.arguments,
                stdin: step.stdin,
                environment: baseEnvironment,
                in: base
            )
            #expect(result.status == 0, "set-up \(step): \(result.stderr)")
        }

        let shim = try await FaultShim(directory: data, scratch: scratch.path)
        // Once without a cut: how many syncs the sequence makes.
        try Self.reset(base, to: data)
        try await shim.snapshot()
        for step in Self.steps {
            let result = try await Self.run(step, shim: shim, cutAt: nil, in: data)
            #expect(result.status == 0, "\(step) without a power cut: \(result.stderr)")
        }
        let syncs = shim.syncCount
        #expect(syncs > Self.steps.count, "the sequence synced \(syncs) times")

        for cut in 1...max(1, syncs) {
            try Self.reset(base, to: data)
            try await shim.snapshot()
            var acknowledged: [Step] = []
            var interrupted: Step?
            for step in Self.steps {
                let result = try await Self.run(step, shim: shim, cutAt: cut, in: data)
                if shim.isCut {
                    interrupted = step
                    break
                }
                #expect(result.status == 0, "cut \(cut): \(step) failed: \(result.stderr)")
                acknowledged.append(step)
            }
            try await shim.restore()
            try await Self.check(data, acknowledged: acknowledged, interrupted: interrupted, cut: cut)
        }
    }

    static func environment(_ directory: String) -> [String: String] {
        [
            "PROFILE_ESCROW_DATABASE": directory + "/escrow.sqlite",
            "PROFILE_ESCROW_KEYRING": directory + "/keyring",
        ]
    }

    static func run(_ step: Step, shim: FaultShim, cutAt: Int?, in directory: String) async throws -> ProfileEscrowCLI.Result
    {
        try await ProfileEscrowCLI.run(
            step.arguments,
            stdin: step.stdin,
            environment: environment(directory).merging(shim.environment(cutAt: cutAt)) { $1 },
            in: directory
        )
    }

    /// `to` made a copy of `from` (regular files only).
    static func reset(_ from: String, to: String) throws {
        let files = FileManager.default
        try? files.removeItem(atPath: to)
        try files.createDirectory(atPath: to, withIntermediateDirectories: true)
        for name in try files.contentsOfDirectory(atPath: from) {
            try files.copyItem(atPath: from + "/" + name, toPath: to + "/" + name)
        }
    }

    static func check(_ directory: String, acknowledged: [Step], interrupted: Step?, cut: Int) async throws {
        let context = "power cut at sync \(cut) during \(interrupted.map(String.init(describing:)) ?? "nothing")"
        let logger = Logger(label: "power-cut-test")
        // The keyring: whole, and at least as new as the acknowledged rotations made it.
        let keyring: Keyring
        do {
            keyring = try Keyring.load(path: directory + "/keyring")
        } catch {
            Issue.record("\(context): the keyring does not load: \(error)")
            return
        }
        let rotations = acknowledged.filter {
            if case .rotate = $0 { true } else if case .cycle = $0 { true } else { false }
        }
        #expect(keyring.keys.count >= 1 + rotations.count, "\(context): \(keyring.keys.count) key versions")

        let store = try SQLiteEscrowStore(path: directory + "/escrow.sqlite", logger: logger)
        defer { try? store.close() }
        let integrity = try await DatabaseQueue(path: directory + "/escrow.sqlite").read {
            try String.fetchAll($0, sql: "PRAGMA integrity_check")
        }
        #expect(integrity == ["ok"], "\(context): integrity \(integrity)")

        #expect(try await auditChainIsIntact(store), "\(context): the audit chain does not verify")

        // Escrows: every acknowledged capture there unless an acknowledged erase came after it; every acknowledged
        // erasure gone; every escrow there opens with the keyring.
        let escrow = Escrow(store: store, keyring: keyring, logger: logger)
        var expected: [Int: Bool] = [0: true, 1: true, 2: true, 3: true]
        for step in acknowledged {
            if case .capture(let user) = step { expected[user] = true }
            if case .erase(let user) = step { expected[user] = false }
        }
        for (user, present) in expected.sorted(by: { $0.key < $1.key }) {
            if case .capture(user)? = interrupted { continue }
            if case .erase(user)? = interrupted { continue }
            let record = try await store.record(blindIndex: keyring.blindIndex(userIdentifier: Self.user(user)))
            #expect((record != nil) == present, "\(context): user \(user) should be \(present ? "held" : "gone")")
            if let record {
                do {
                    _ = try await escrow.open(record, actor: .library)
                } catch {
                    Issue.record("\(context): user \(user)'s escrow does not open: \(error)")
                }
            }
        }

        // Tokens: revocations stay revoked, added tokens stay.
        let tokens = try await SQLiteTokenStore(path: directory + "/tokens.sqlite", logger: logger).tokens()
        for step in acknowledged {
            if case .revoke(let name) = step {
                #expect(tokens.first { $0.name == name }?.isRevoked == true, "\(context): \(name) is not revoked")
            }
            if case .addToken(let name) = step {
                #expect(tokens.contains { $0.name == name }, "\(context): token \(name) is missing")
            }
        }
    }
}
