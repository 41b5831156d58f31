import EscrowCore
import EscrowCrypto
import EscrowCustody
import EscrowSQLite
import EscrowTestSupport
import Foundation
import Logging
import ProfileEscrow
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Key custody against the real engines `scripts/test.sh` starts: an OpenBao server (Transit) and a SoftHSM2 token.
/// Serialized: one test stops and restarts the OpenBao server.
@Suite(.serialized) struct CustodyEngineTests {
    /// A node's folder: a keyring in custody (made by the real CLI), a SQLite store, and the escrow over them.
    struct Node {
        let directory = TemporaryDirectory()
        let engine: CustodyEngine
        var keyringPath: String { directory.path + "/keyring" }
        var databasePath: String { directory.path + "/escrow.sqlite" }

        init(_ kind: CustodyEngine.Kind, initialize: Bool = true, openBao: PrivateOpenBao? = nil) async throws {
            engine = try CustodyEngine.make(kind, openBao: openBao)
            if initialize {
                let result = try await cli(["keys", "init"] + engine.arguments)
                try #require(result.status == 0, "keys init: \(result.stderr)")
            }
        }

        /// Runs the CLI on this node's keyring and store, with the engine's credential unless told otherwise.
        func cli(_ arguments: [String], environment: [String: String]? = nil) async throws -> ProfileEscrowCLI.Result {
            try await ProfileEscrowCLI.run(
                arguments + ["--keyring", keyringPath, "--database", databasePath],
                environment: environment ?? engine.environment,
                in: directory.path
            )
        }

        func escrow(_ keyring: Keyring) throws -> Escrow {
            let store = try SQLiteEscrowStore(path: databasePath, logger: Logger(label: "test"))
            return Escrow(store: store, keyring: keyring, logger: Logger(label: "test"))
        }

        func load() async throws -> Keyring {
            try await KeyringCustody.load(path: keyringPath, environment: engine.environment)
        }

        /// Output that must never hold the credential.
        func expectNoCredential(_ result: ProfileEscrowCLI.Result, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(!result.stdout.contains(engine.credential), sourceLocation: sourceLocation)
            #expect(!result.stderr.contains(engine.credential), sourceLocation: sourceLocation)
        }
    }

    static func profile(_ number: Int) throws -> Profile {
        try Profile(
            userIdentifier: "000000.custodytest\(String(format: "%020d", number)).0001",
            fullName: PersonName(givenName: "FAKEGIVEN\(number)", familyName: "FAKEFAMILY\(number)"),
            email: "fake\(number)@example.invalid",
            realUserStatus: .likelyReal
        )
    }

    @Test(arguments: CustodyEngine.Kind.allCases)
    func theWholeEscrowLoopUnderCustody(kind: CustodyEngine.Kind) async throws {
        let node = try await Node(kind)
        #expect(try SecretScan.lines(node.keyringPath)[0] == "profile-escrow-keyring 2")
        let shown = try await node.cli(["keys", "show"], environment: [:])
        #expect(shown.status == 0)
        #expect(shown.stdout.contains("custody: \(kind.rawValue)"))
        #expect(shown.stdout.contains("secret wrapped"))

        let escrow = try node.escrow(try await node.load())
        _ = try await escrow.capture(try Self.profile(1))
        #expect(try await escrow.replay(userIdentifier: Self.profile(1).userIdentifier).profile == Self.profile(1))

        // rotate, rewrap, retire and cycle work on the wrapped keyring; each new version is wrapped too.
        let rotated = try await node.cli(["keys", "rotate"])
        #expect(rotated.status == 0, "\(rotated.stderr)")
        let rewrapped = try await node.cli(["keys", "rewrap"])
        #expect(rewrapped.status == 0, "\(rewrapped.stderr)")
        let retired = try await node.cli(["keys", "retire", "1"])
        #expect(retired.status == 0, "\(retired.stderr)")
        let cycled = try await node.cli(["keys", "cycle", "--grace", "0s"])
        #expect(cycled.status == 0, "\(cycled.stderr)")
        for result in [shown, rotated, rewrapped, retired, cycled] { node.expectNoCredential(result) }

        let lines = try SecretScan.lines(node.keyringPath)
        #expect(lines.filter { $0.hasPrefix("key ") }.map { $0.hasSuffix(" -") } == [true, true, false])
        let keyring = try await node.load()
        #expect(keyring.activeVersion == 3)
        let reopened = try node.escrow(keyring)
        #expect(try await reopened.replay(userIdentifier: Self.profile(1).userIdentifier).profile == Self.profile(1))
        _ = try await reopened.capture(try Self.profile(2))
        #expect(try await reopened.replay(userIdentifier: Self.profile(2).userIdentifier).profile == Self.profile(2))

        // No master secret in the file, in any form.
        let secrets = try SecretScan.masterSecrets(of: keyring, scratch: node.directory.path + "/scratch")
        #expect(secrets.count == 1)
        #expect(!(try SecretScan.file(node.keyringPath, holdsAnyOf: secrets)))

        // A capture-only node needs no engine.
        let exported = try await node.cli(
            ["keys", "export-public", "--out", node.directory.path + "/public"],
            environment: [:]
        )
        #expect(exported.status == 0, "\(exported.stderr)")
        let publicOnly = try await KeyringCustody.load(path: node.directory.path + "/public", environment: [:])
        #expect(publicOnly.isPublicOnly)
        #expect(!(try SecretScan.file(node.directory.path + "/public", holdsAnyOf: secrets)))
    }

    @Test(arguments: CustodyEngine.Kind.allCases)
    func aWrongOrMissingCredentialExits4NamingTheEngine(kind: CustodyEngine.Kind) async throws {
        let node = try await Node(kind)
        for environment in [
            node.engine.wrongCredential, node.engine.wrongCredential.filter { $0.key == "SOFTHSM2_CONF" },
        ] {
            let result = try await node.cli(["keys", "rewrap"], environment: environment)
            #expect(result.status == 4, "\(result.stderr)")
            #expect(result.stderr.contains(kind.rawValue))
            #expect(!result.stderr.contains("000000") && !result.stderr.contains("notAValidToken"))
            node.expectNoCredential(result)
        }
        // A key the engine does not have (or this token may not use): refused, never created when unwrapping.
        let missing = "no-such-key-" + Hex.encode(Hashing.randomBytes(count: 4))
        let other = try CustodyEngine.make(kind, key: missing, transitKey: missing)
        let error = await #expect(throws: CryptoError.self) {
            _ = try await KeyringCustody.custodian(for: other.custody, environment: other.environment)
                .unwrap(Array("vault:v1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA".utf8), associatedData: [1])
        }
        #expect(error?.code == .custodyRefused, "\(error?.message ?? "")")
    }

    @Test(arguments: CustodyEngine.Kind.allCases)
    func aTamperedOrMovedBlobExits4(kind: CustodyEngine.Kind) async throws {
        let node = try await Node(kind)
        await #expect(try node.cli(["keys", "rotate"]).status == 0)
        let original = try SecretScan.lines(node.keyringPath)

        // One character of version 2's wrapped secret changed.
        var tampered = original
        var fields = tampered[tampered.count - 1].split(separator: " ").map(String.init)
        var blob = [UInt8](Data(base64Encoded: fields[4])!)
        blob[blob.count - 5] ^= 0x01
        fields[4] = Data(blob).base64EncodedString()
        tampered[tampered.count - 1] = fields.joined(separator: " ")
        try SecretScan.write(tampered, to: node.keyringPath)
        let altered = try await node.cli(["keys", "rewrap"])
        #expect(altered.status == 4, "\(altered.stderr)")
        #expect(altered.stderr.contains(kind.rawValue))
        node.expectNoCredential(altered)

        // Versions 1 and 2 swapped their wrapped secrets: the associated data catches it.
        var swapped = original
        var first = swapped[swapped.count - 2].split(separator: " ").map(String.init)
        var second = swapped[swapped.count - 1].split(separator: " ").map(String.init)
        (first[4], second[4]) = (second[4], first[4])
        swapped[swapped.count - 2] = first.joined(separator: " ")
        swapped[swapped.count - 1] = second.joined(separator: " ")
        try SecretScan.write(swapped, to: node.keyringPath)
        let moved = try await node.cli(["keys", "rewrap"])
        #expect(moved.status == 4, "\(moved.stderr)")
        #expect(moved.stderr.contains("wrapped") || moved.stderr.contains("altered"))

        try SecretScan.write(original, to: node.keyringPath)
        await #expect(try node.cli(["keys", "rewrap"]).status == 0)
    }

    @Test(arguments: CustodyEngine.Kind.allCases)
    func aCopiedKeyringOpensNothingWithoutTheEngine(kind: CustodyEngine.Kind) async throws {
        let node = try await Node(kind)
        let escrow = try node.escrow(try await node.load())
        _ = try await escrow.capture(try Self.profile(3))

        let elsewhere = TemporaryDirectory()
        let copy = elsewhere.path + "/keyring"
        try FileManager.default.copyItem(atPath: node.keyringPath, toPath: copy)
        // Without the credential: refused.
        await #expect(throws: CryptoError.self) {
            _ = try await KeyringCustody.load(path: copy, environment: [:])
        }
        // The file alone: its secrets are wrapped, nothing opens.
        let fileOnly = try Keyring.load(path: copy)
        #expect(fileOnly.isWrapped)
        let thief = try node.escrow(fileOnly)
        await #expect(throws: (any Error).self) {
            _ = try await thief.replay(userIdentifier: Self.profile(3).userIdentifier)
        }
    }

    @Test(arguments: CustodyEngine.Kind.allCases)
    func wrapAndUnwrapMoveAPlainKeyringThroughASymlink(kind: CustodyEngine.Kind) async throws {
        let node = try await Node(kind, initialize: false)
        let real = node.directory.path + "/secrets/keyring.real"
        try FileManager.default.createDirectory(
            atPath: node.directory.path + "/secrets",
            withIntermediateDirectories: true
        )
        let initialized = try await ProfileEscrowCLI.run(["keys", "init", "--keyring", real], in: node.directory.path)
        #expect(initialized.status == 0, "\(initialized.stderr)")
        try FileManager.default.createSymbolicLink(atPath: node.keyringPath, withDestinationPath: real)
        let plainSecrets = try SecretScan.masterSecrets(inPlainFile: real)
        let escrow = try node.escrow(try Keyring.load(path: node.keyringPath))
        _ = try await escrow.capture(try Self.profile(4))

        let wrapped = try await node.cli(["keys", "custody", "wrap"] + node.engine.arguments)
        #expect(wrapped.status == 0, "\(wrapped.stderr)")
        node.expectNoCredential(wrapped)
        let attributes = try FileManager.default.attributesOfItem(atPath: node.keyringPath)
        #expect(attributes[.type] as? FileAttributeType == .typeSymbolicLink)
        #expect(try SecretScan.lines(real)[0] == "profile-escrow-keyring 2")
        #expect(!(try SecretScan.file(real, holdsAnyOf: plainSecrets)))
        let unwrapped = try await node.load()
        #expect(
            try await node.escrow(unwrapped).replay(userIdentifier: Self.profile(4).userIdentifier).profile
                == Self.profile(4)
        )

        let events = try await escrow.store.auditEvents(after: 0, limit: 100).map(\.draft.type)
        #expect(events.contains(.keysCustodyChanged))

        let back = try await node.cli(["keys", "custody", "unwrap"])
        #expect(back.status == 0, "\(back.stderr)")
        #expect(try SecretScan.lines(real)[0] == "profile-escrow-keyring 1")
        #expect(try SecretScan.masterSecrets(inPlainFile: real) == plainSecrets)
    }

    /// The engine goes away under a running node: it keeps the keys it has, says so, and recovers with the engine.
    @Test
    func aRunningNodeKeepsItsKeysWhenTransitGoesAway() async throws {
        let openBao = try PrivateOpenBao()
        let node = try await Node(.transit, openBao: openBao)
        let escrow = try node.escrow(try await node.load())
        let reloader = KeyringReloader(
            escrow: escrow,
            path: node.keyringPath,
            environment: node.engine.environment,
            logger: Logger(label: "test")
        )
        _ = try await escrow.capture(try Self.profile(5))
        #expect(await reloader.reload(because: "test"))
        #expect(escrow.custodyHealth.problem == nil)

        try openBao.halt()
        do {
            #expect(!(await reloader.reload(because: "test")))
            let problem = try #require(escrow.custodyHealth.problem)
            #expect(problem.code == "custody_unavailable")
            #expect(problem.message.contains("transit"))
            #expect(!problem.message.contains(node.engine.credential))
            // The keys in use stay: capture and replay go on, no engine call per escrow.
            _ = try await escrow.capture(try Self.profile(6))
            #expect(try await escrow.replay(userIdentifier: Self.profile(6).userIdentifier).profile == Self.profile(6))
            // A starting process exits 4, naming the engine.
            let starting = try await node.cli(["keys", "rewrap"])
            #expect(starting.status == 4)
            #expect(starting.stderr.contains("transit") && starting.stderr.contains("unreachable"))
        } catch {
            try openBao.resume()
            throw error
        }
        try openBao.resume()
        // OpenBao takes a moment to unseal: the reload succeeds once it answers.
        try await EscrowTestSupport.eventually("a reload once OpenBao is back", within: 20, every: .milliseconds(500)) {
            await reloader.reload(because: "test")
        }
        #expect(escrow.custodyHealth.problem == nil)
        #expect(try await escrow.replay(userIdentifier: Self.profile(5).userIdentifier).profile == Self.profile(5))
    }

    /// A running `serve` whose engine goes away: at the next reload (SIGHUP) `/readyz` answers 503 (the reason only in
    /// the log) and the gauge is 0, while it keeps capturing; once the engine is back it recovers by itself.
    @Test
    func serveReportsTheEngineOutageInReadyz() async throws {
        let openBao = try PrivateOpenBao()
        let node = try await Node(.transit, openBao: openBao)
        let port = Self.freePort()
        let processes = ProfileEscrowProcesses(directory: node.directory.path, environment: node.engine.environment)
        defer { processes.killAll() }
        let serve = try processes.start(
            "serve",
            [
                "serve", "--keyring", node.keyringPath, "--database", node.databasePath, "--port", "\(port)",
                "--no-worker",
            ]
        )
        let readyz = "http://127.0.0.1:\(port)/readyz"
        try await Self.eventually("serve is ready") { try await Self.get(readyz, in: node.directory.path).status == 200 }

        try openBao.halt()
        do {
            kill(serve.processIdentifier, SIGHUP)
            try await Self.eventually("readyz reports the outage") {
                let answer = try await Self.get(readyz, in: node.directory.path)
                return answer.status == 503 && answer.body.contains("custody_unavailable")
            }
            // Nothing about the engine for an unauthenticated caller: no address, key name or error text.
            let answer = try await Self.get(readyz, in: node.directory.path)
            let address = try #require(openBao.variables["PROFILE_ESCROW_TEST_BAO_ADDR"])
            for told in ["transit", address.replacingOccurrences(of: "http://", with: ""), "unreachable"] {
                #expect(!answer.body.contains(told), "/readyz tells \(told)")
            }
            #expect(!answer.body.contains(node.engine.credential))
            let metrics = try await Self.get("http://127.0.0.1:\(port)/metrics", in: node.directory.path)
            #expect(metrics.body.contains("profile_escrow_custody_up 0"))
            #expect(serve.isRunning)
        } catch {
            try openBao.resume()
            throw error
        }
        try openBao.resume()
        // Tried again every 2 s while failing: ready again without a signal.
        try await Self.eventually("readyz recovers") { try await Self.get(readyz, in: node.directory.path).status == 200 }
        processes.stopAll()
        let log = processes.logs.map { ProfileEscrowCLI.text(atPath: $0) }.joined()
        #expect(log.contains("custody engine did not unwrap"))
        #expect(!log.contains(node.engine.credential))
    }

    static func freePort() -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// `GET url` with curl: the status and the body.
    static func get(_ url: String, in directory: String) async throws -> (status: Int, body: String) {
        let result = try await ProfileEscrowCLI.run(
            ["-s", "-m", "5", "-w", "\n%{http_code}", url],
            executable: "/usr/bin/curl",
            in: directory
        )
        var lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        let status = Int(lines.popLast() ?? "") ?? 0
        return (status, lines.joined(separator: "\n"))
    }

    /// Polls `condition` every 0.25 s for up to 30 s (the shared `eventually`).
    static func eventually(_ what: String, _ condition: () async throws -> Bool) async throws {
        try await EscrowTestSupport.eventually(what, within: 30, every: .milliseconds(250), condition)
    }

    /// After a Transit key rotation, `keys custody rewrap` moves every wrapped secret to the newest key version.
    @Test func aTransitRotationThenCustodyRewrap() async throws {
        let node = try await Node(.transit)
        await #expect(try node.cli(["keys", "rotate"]).status == 0)
        try CustodyEngine.openBaoRoot(
            "POST",
            "transit/keys/\(try CustodyEngine.variable("PROFILE_ESCROW_TEST_BAO_KEY"))/rotate"
        )
        let before = try Self.transitVersions(node.keyringPath)
        let rewrapped = try await node.cli(["keys", "custody", "rewrap"])
        #expect(rewrapped.status == 0, "\(rewrapped.stderr)")
        let after = try Self.transitVersions(node.keyringPath)
        #expect(after.count == 2)
        #expect(zip(before, after).allSatisfy { $0 < $1 })
        #expect(try await node.load().keys.allSatisfy(\.hasSecretKey))
    }

    /// The Transit key versions (`vault:vN:`) of a keyring file's wrapped secrets.
    static func transitVersions(_ path: String) throws -> [Int] {
        try SecretScan.lines(path).filter { $0.hasPrefix("key ") }.compactMap { line in
            let field = line.split(separator: " ")[4]
            guard let data = Data(base64Encoded: String(field)) else { return nil }
            let text = String(decoding: data, as: UTF8.self)
            return Int(text.split(separator: ":")[1].dropFirst())
        }
    }
}
