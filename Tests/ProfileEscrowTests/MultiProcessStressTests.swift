import AsyncHTTPClient
import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import GRDB
import Glibc
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import ProfileEscrow
import Testing

@testable import EscrowSQLite

/// Many processes on one SQLite store, as SQLite's own multi-process tester drives it: `serve` (with its
/// worker) under HTTP load, two separate `replay` workers (one of them killed with SIGKILL and replaced
/// mid-run), and a loop of CLI commands (erase, requeue, sweep, keys cycle) beside them. Then: no caller got
/// an error its operation did not deserve, `PRAGMA integrity_check` is ok, the chain verifies, and every
/// acknowledged capture is either still held or purged with a reason.
///
/// Short here (`PROFILE_ESCROW_STRESS_SECONDS`, default 4); `scripts/stress.sh` runs it longer.
@Suite("Many processes on one store", .serialized)
struct MultiProcessStressTests {
    static var seconds: Double {
        ProcessInfo.processInfo.environment["PROFILE_ESCROW_STRESS_SECONDS"].flatMap(Double.init) ?? 4
    }

    /// Everything a caller was told, by operation.
    final class Outcomes: Sendable {
        struct State {
            var acknowledged: [(user: Int, escrowID: String)] = []
            var undeserved: [String] = []
            var commands: [String: Int] = [:]
        }
        let state = NIOLockedValueBox(State())

        func fail(_ what: String) { state.withLockedValue { $0.undeserved.append(what) } }
        func count(_ command: String) { state.withLockedValue { $0.commands[command, default: 0] += 1 } }
    }

    @Test func serveWorkersAndOperatorCommandsShareOneStore() async throws {
        let directory = TemporaryDirectory()
        let database = directory.path + "/escrow.sqlite"
        let keyring = directory.path + "/keyring"
        let base = ["PROFILE_ESCROW_DATABASE": database, "PROFILE_ESCROW_KEYRING": keyring]
        func cli(_ arguments: [String]) async throws -> ProfileEscrowCLI.Result {
            try await ProfileEscrowCLI.run(arguments, environment: base, in: directory.path)
        }
        #expect(try await cli(["keys", "init"]).status == 0)
        let token = try await cli(["tokens", "add", "load", "--scope", "capture", "read", "confirm", "erase"])
        #expect(token.status == 0, "\(token.stderr)")
        let bearer = token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let secret = WebhookSecret.generateText()
        let stub = try await FakeBackend.start(secret: secret)
        defer { Task { await stub.stop() } }
        stub.respond { request, count in
            let roll = Int(request.idempotencyKey?.utf8.last ?? 0) % 10
            if count == 0, roll < 2 { return .status(503, headers: ["Retry-After": "0"]) }
            return .status(roll == 9 ? 202 : 200)
        }

        let port = try freePort()
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PROFILE_ESCROW_") }
        environment.merge(base) { $1 }
        environment["PROFILE_ESCROW_WEBHOOK_SECRET"] = secret
        let tuning = [
            "--backend", stub.url, "--concurrency", "4", "--lease", "2s", "--delivery-timeout", "1s",
            "--backoff-base", "50ms", "--backoff-max", "1s", "--poll-interval", "50ms",
        ]
        func launch(_ name: String, _ arguments: [String]) throws -> ChildProcess {
            let process = ChildProcess()
            process.executableURL = ProfileEscrowCLI.binary
            process.arguments = arguments
            process.environment = environment
            let log = directory.path + "/\(name).log"
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            process.standardOutput = FileHandle(forWritingAtPath: log)
            process.standardError = FileHandle(forWritingAtPath: log)
            try process.run()
            return process
        }
        let serve = try launch(
            "serve",
            ["serve", "--port", "\(port)", "--rate-limit", "100000", "--rate-burst", "100000"] + tuning
        )
        var workers = [
            try launch("worker-1", ["replay", "-v"] + tuning), try launch("worker-2", ["replay", "-v"] + tuning),
        ]
        defer { for process in [serve] + workers where process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        defer { _ = http.shutdown() }
        let url = "http://127.0.0.1:\(port)"
        try await eventually("serve to answer", within: 60) {
            (try? await http.execute(HTTPClientRequest(url: url + "/healthz"), timeout: .seconds(1)).status) == .ok
        }

        let victim = workers[0]
        let outcomes = Outcomes()
        let deadline = Date().addingTimeInterval(Self.seconds)
        // On a loaded machine (the whole suite in parallel) the load runs on past the deadline until more than 20
        // captures were acknowledged, within a minute.
        let hardDeadline = Date().addingTimeInterval(60)
        let loadRan: @Sendable () -> Bool = { outcomes.state.withLockedValue { $0.acknowledged.count } > 20 }
        let nextUser = NIOLockedValueBox(0)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    while Date() < deadline || (!loadRan() && Date() < hardDeadline) {
                        let user = nextUser.withLockedValue { value -> Int in
                            value += 1
                            return value
                        }
                        var request = HTTPClientRequest(url: url + "/v1/escrows")
                        request.method = .POST
                        request.headers.add(name: "Authorization", value: "Bearer \(bearer)")
                        request.headers.add(name: "Content-Type", value: "application/json")
                        request.body = .bytes(ByteBuffer(string: CLITests.body(user)))
                        let response = try await http.execute(request, timeout: .seconds(30))
                        let body = try await response.body.collect(upTo: 1 << 16)
                        guard response.status == .created,
                            let json = try JSONSerialization.jsonObject(with: Data(body.readableBytesView))
                                as? [String: Any],
                            let id = json["escrowId"] as? String
                        else {
                            outcomes.fail(
                                "capture answered \(response.status.code): \(String(buffer: body).prefix(200))"
                            )
                            continue
                        }
                        outcomes.state.withLockedValue { $0.acknowledged.append((user, id)) }
                    }
                }
            }
            // The operator, beside the service: each command succeeds (erase of a user not held: exit 3).
            group.addTask {
                var round = 0
                while Date() < deadline {
                    round += 1
                    let user = Int.random(in: 1...max(1, nextUser.withLockedValue { $0 }))
                    let commands: [([String], Set<Int32>)] =
                        [
                            (["erase", CLITests.user(user)], [0, 3]), (["requeue", "--all-dead"], [0]),
                            (["sweep"], [0]),
                            (["purge-report", "--verify"], [0]),
                        ] + (round % 4 == 1 ? [(["keys", "cycle", "--grace", "3s"], [0])] : [])
                    for (arguments, allowed) in commands {
                        let result = try await cli(arguments)
                        outcomes.count(arguments[0])
                        if !allowed.contains(result.status) {
                            outcomes.fail(
                                "\(arguments.joined(separator: " ")) exited \(result.status): \(result.stderr.prefix(300))"
                            )
                        }
                    }
                }
            }
            // A worker killed at a random moment, and replaced (real time: the worker is a real process).
            group.addTask {
                try await pause(for: .milliseconds(Int64(Self.seconds * 400)))
                kill(victim.processIdentifier, SIGKILL)
            }
            try await group.waitForAll()
        }
        await workers[0].exited()
        workers[0] = try launch("worker-3", ["replay", "-v"] + tuning)
        // Signals are handled once the worker runs (before that SIGTERM would just end it).
        try await eventually("the new worker to start", within: 60) {
            ProfileEscrowCLI.text(atPath: directory.path + "/worker-3.log")
                .contains("replay worker started")
        }

        // Let the workers deliver what is due, then stop everything gracefully.
        var readOnly = SQLiteEscrowStore.Configuration()
        readOnly.readOnly = true
        let reader = try SQLiteEscrowStore(path: database, configuration: readOnly, logger: Logger(label: "test"))
        try await eventually("the backlog to drain", within: 120) {
            let live = try await reader.summary(at: Date()).live
            return (live[.pending] ?? 0) + (live[.leased] ?? 0) == 0
        }
        for process in [serve] + workers { kill(process.processIdentifier, SIGTERM) }
        try await eventually("every process to stop on SIGTERM", within: 60) {
            !([serve] + workers).contains(where: \.isRunning)
        }
        for (name, process) in zip(["serve", "worker-3", "worker-2"], [serve] + workers) {
            let log = (try? String(contentsOfFile: directory.path + "/\(name).log", encoding: .utf8)) ?? ""
            #expect(
                process.terminationReason == .exit && process.terminationStatus == 0,
                "\(name) ended with \(process.terminationStatus): \(log.suffix(600))"
            )
        }

        let state = outcomes.state.withLockedValue { $0 }
        #expect(state.undeserved.isEmpty, "\(state.undeserved.prefix(5))")
        #expect(state.acknowledged.count > 20, "the load ran")
        #expect((state.commands["keys"] ?? 0) >= 1 && (state.commands["erase"] ?? 0) >= 1)
        #expect(stub.violations.isEmpty, "\(stub.violations.prefix(5))")

        let integrity = try await reader.pool.read { try String.fetchOne($0, sql: "PRAGMA integrity_check") }
        #expect(integrity == "ok")
        let verify = try await cli(["purge-report", "--verify", "--format", "json"])
        #expect(verify.status == 0, "\(verify.stderr)")
        let events = try await reader.auditEvents(after: 0, limit: 1_000_000).map(\.draft)
        let purged = Dictionary(grouping: events.filter { $0.type == .purged }, by: { $0.escrowID ?? "" })
        let confirming = Set(stub.answered.filter { [200, 201, 204, 409].contains($0.status) }.map(\.key))
        for (_, id) in state.acknowledged {
            guard let escrowID = EscrowID(hex: id) else {
                Issue.record("an acknowledged capture without an escrow id")
                continue
            }
            if let purges = purged[id] {
                #expect(purges.count == 1, "purged once")
                let reason = purges.first?.detail
                #expect(["confirmed", "erased", "replaced", "expired"].contains(reason ?? ""))
                if reason == "confirmed" {
                    #expect(confirming.contains(id), "purged as confirmed without a confirming answer")
                }
            } else {
                #expect(
                    try await reader.record(id: escrowID) != nil,
                    "an acknowledged capture is neither held nor purged"
                )
            }
        }
    }
}
