import AsyncHTTPClient
import EscrowCore
import EscrowCrypto
import EscrowPostgres
import EscrowTestSupport
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// PostgreSQL stopped with `pg_ctl stop -m immediate` (a crash, as far as the server's files know) while a `serve`
/// node takes concurrent captures, then started again: while it is down captures answer 503, never a 2xx that was not
/// durable; once it is back the same `serve` process captures again by itself.
///
/// Before the store bounded an operation whose connection was lost (`StoreDatabase.untilLost`), this failed in most
/// runs: a transaction whose connection died between two statements waited forever in its next statement, and the
/// group commit and every capture behind it with it.
@Suite("PostgreSQL: an immediate restart under load")
struct RestartUnderLoadTests {
    @Test func capturesAnswer503WhileDownAndResumeByThemselves() async throws {
        // A server of this test's own: stopping the suite's shared one would break the tests beside this one.
        let server = try OwnServer.start()
        defer { server.stop() }
        let directory = TemporaryDirectory()
        let environment = [
            "PROFILE_ESCROW_DATABASE": server.url, "PROFILE_ESCROW_KEYRING": directory.path + "/keyring",
        ]
        let token = try await ProfileEscrowCLI.setUpCaptureNode(
            token: "restart.pgtest",
            environment: environment,
            in: directory.path
        )

        let port = try freePort()
        let processes = ProfileEscrowProcesses(directory: directory.path, environment: environment)
        defer { processes.killAll() }
        let serve = try processes.startCaptureNode("serve", port: port)
        struct Answer {
            var status: Int  // -1: no HTTP answer at all
            var escrowID: String?
            /// When the request was sent, and when its answer came.
            var sent: ContinuousClock.Instant
            var at: ContinuousClock.Instant
        }
        let began = ContinuousClock.now
        var down = began
        var up = began
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let all: [Answer]
        do {
            try await waitUntilHealthy(client, port: port)

            // Eight clients capture new users in a loop until told to stop; every answer is recorded.
            let answers = NIOLockedValueBox([Answer]())
            let stopping = NIOLockedValueBox(false)
            let next = NIOLockedValueBox(0)
            func acknowledged(since start: ContinuousClock.Instant) -> Int {
                answers.withLockedValue { $0.filter { $0.status == 201 && $0.at > start }.count }
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        while !stopping.withLockedValue({ $0 }) {
                            let number = next.withLockedValue { value -> Int in
                                value += 1
                                return value
                            }
                            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/escrows")
                            request.method = .POST
                            request.headers.add(name: "Authorization", value: "Bearer \(token)")
                            request.headers.add(name: "Content-Type", value: "application/json")
                            request.body = .bytes(ByteBuffer(string: ServeKillTests.body(number)))
                            let sent = ContinuousClock.now
                            var answer = Answer(status: -1, escrowID: nil, sent: sent, at: sent)
                            do {
                                let response = try await client.execute(request, timeout: .seconds(30))
                                answer.status = Int(response.status.code)
                                let body = try? await response.body.collect(upTo: 4096)
                                let json = body.flatMap {
                                    try? JSONSerialization.jsonObject(with: Data($0.readableBytesView))
                                        as? [String: Any]
                                }
                                answer.escrowID = json?["escrowId"] as? String
                            } catch {
                                answer.escrowID = "\(error)"
                            }
                            answer.at = .now
                            answers.withLockedValue { $0.append(answer) }
                            // A client's pause after a failure (real time: the server and the database are
                            // real processes), so that eight clients do not spin while the database is down.
                            if answer.status != 201 { try await pause(for: .milliseconds(50)) }
                        }
                    }
                }
                try await eventually("captures before the restart", within: 60, every: .milliseconds(100)) {
                    acknowledged(since: began) >= 30
                }
                try server.pgctl(["-m", "immediate", "stop"])
                down = .now
                // Longer than the store's wait for a connection (5 s), so that captures fail while it is down
                // (real time: serve and the database are real processes).
                try await pause(for: .seconds(8))
                try server.pgctl(["-l", server.directory + "/server.log", "-t", "60", "start"])
                up = .now
                do {
                    try await eventually(
                        "captures after the restart, without restarting serve",
                        within: 30,
                        every: .milliseconds(100)
                    ) {
                        acknowledged(since: up) >= 30
                    }
                } catch {
                    let recent = answers.withLockedValue { $0.suffix(3).map { "\($0.status) \($0.escrowID ?? "")" } }
                    let served = processes.logs.compactMap { try? String(contentsOfFile: $0, encoding: .utf8) }.joined()
                    Issue.record("last answers \(recent); serve's log ends: \(served.suffix(1500))")
                    stopping.withLockedValue { $0 = true }
                    throw error
                }
                stopping.withLockedValue { $0 = true }
                try await group.waitForAll()
            }
            all = answers.withLockedValue { $0 }
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
        #expect(serve.isRunning, "serve lived through the restart")

        let statuses = Set(all.map(\.status))
        #expect(statuses.isSubset(of: [201, 503]), "answers \(statuses.sorted()) (only 201 or 503 may be given)")
        // The captures that reached a store without its server failed with 503 (each after the store's bounded wait for
        // a connection): none sent once the server had stopped and answered before it was back was a success. (Not
        // judged by when the answer came alone: a capture committed just before the stop is rightly a 201, and on a
        // loaded machine its answer can come seconds later.)
        #expect(all.contains { $0.status == 503 }, "no capture failed while the server was down")
        let whileDown = all.filter { $0.sent > down && $0.at < up }
        #expect(!whileDown.isEmpty, "captures were sent while the server was down")
        #expect(whileDown.allSatisfy { $0.status == 503 }, "\(whileDown.map(\.status))")

        // Each acknowledged capture is in the store after the crash and the recovery; the chain verifies.
        let store = try await PostgresEscrowStore.connect(url: server.url, logger: TestDatabase.logger)
        let ids = all.filter { $0.status == 201 }.compactMap(\.escrowID)
        #expect(ids.count >= 60)
        for id in ids {
            #expect(try await store.record(id: try #require(EscrowID(hex: id))) != nil, "acknowledged \(id) lost")
        }
        let events = try await allEvents(store)
        var verifier = AuditChain.Verifier()
        for event in events { verifier.consume(event) }
        verifier.finish(head: try await store.auditHead())
        #expect(verifier.isIntact)
        await store.close()
        processes.signal("serve", SIGTERM)
    }
}

/// A PostgreSQL server started by `scripts/postgres.sh` for one test, in its own temporary folder.
///
/// Its commands run through `system(3)`, not `Process`: Foundation's `Process` learns that a child ended from a
/// descriptor the child inherits, and the server that `pg_ctl start` leaves running inherits it too, so the wait for
/// the script would never end.
struct OwnServer {
    let url: String
    let directory: String
    let bin: String

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/postgres.sh").path

    static func start() throws -> OwnServer {
        let output = try shell([script, "start"])
        var values: [String: String] = [:]
        for line in output.split(separator: "\n") where line.hasPrefix("export ") {
            let pair = line.dropFirst("export ".count).split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { continue }
            values[String(pair[0])] = String(pair[1]).trimmingCharacters(in: CharacterSet(charactersIn: "'"))
        }
        guard let url = values["PROFILE_ESCROW_TEST_POSTGRES_URL"],
            let directory = values["PROFILE_ESCROW_TEST_POSTGRES_DIR"],
            let bin = values["PROFILE_ESCROW_TEST_POSTGRES_BIN"]
        else { throw ServerFailure(text: "postgres.sh start printed no server: \(output)") }
        return OwnServer(url: url, directory: directory, bin: bin)
    }

    /// `pg_ctl -D <data> -w <arguments>`, as the server's owner (PostgreSQL refuses to run as root).
    func pgctl(_ arguments: [String]) throws {
        let command = [bin + "/pg_ctl", "-D", directory + "/data", "-w"] + arguments
        _ = try Self.shell(getuid() == 0 ? ["runuser", "-u", "postgres", "--"] + command : command)
    }

    func stop() {
        _ = try? Self.shell(["env", "PROFILE_ESCROW_TEST_POSTGRES_DIR=\(directory)", Self.script, "stop"])
    }

    /// Runs `arguments` (each quoted for the shell) and returns its standard output; throws with its standard error
    /// when it fails.
    static func shell(_ arguments: [String]) throws -> String {
        let scratch = TemporaryDirectory()
        let quoted = arguments.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        // Every descriptor of this process but the three standard ones is closed first: a server started here
        // would otherwise hold this process's sockets (the HTTP client's connections) open for as long as it runs.
        let wrapper = scratch.path + "/run.sh"
        let script =
            "for fd in /proc/$$/fd/*; do fd=${fd##*/}; [ \"$fd\" -gt 2 ] && eval \"exec $fd>&-\" 2>/dev/null; done\n"
            + "exec " + quoted.joined(separator: " ") + "\n"
        try script.write(toFile: wrapper, atomically: true, encoding: .utf8)
        let status = system("/bin/bash \(wrapper) >\(scratch.path)/out 2>\(scratch.path)/err </dev/null")
        let output = (try? String(contentsOfFile: scratch.path + "/out", encoding: .utf8)) ?? ""
        guard status == 0 else {
            let error = (try? String(contentsOfFile: scratch.path + "/err", encoding: .utf8)) ?? ""
            throw ServerFailure(text: "\(arguments.first ?? "") exited \(status): \(error)")
        }
        return output
    }

    struct ServerFailure: Error, CustomStringConvertible {
        var text: String
        var description: String { text }
    }
}
