import AsyncHTTPClient
import EscrowCore
import EscrowPostgres
import EscrowTestSupport
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Testing

/// The whole scale-out on one PostgreSQL database, with bad luck on purpose: two `serve` nodes take captures from a
/// client that spreads them over both, two `replay` workers deliver them to a backend on loopback that fails 20% of
/// its deliveries (500, 503, or a connection closed without an answer), while a node and a worker are killed with
/// SIGKILL and started again, and PostgreSQL itself is stopped with `-m immediate` and started again.
///
/// Then: every acknowledged capture was delivered and confirmed, each purged exactly once as confirmed, every
/// delivery of an escrow carried its one Idempotency-Key, no escrow was purged as confirmed without a 2xx from the
/// backend, one audit chain verifies (`purge-report --verify`), and no fake name or email is in any log or in the
/// server's files. `scripts/pg-cluster-check.sh` runs it with more captures (`PROFILE_ESCROW_CLUSTER_CAPTURES`).
@Suite("PostgreSQL: two nodes, two workers, chaos, kills and a restart")
struct ClusterCheckTests {
    static let captures = Int(ProcessInfo.processInfo.environment["PROFILE_ESCROW_CLUSTER_CAPTURES"] ?? "") ?? 2_000

    @Test func everyAcknowledgedCaptureIsConfirmedOnceThroughFaults() async throws {
        let server = try OwnServer.start()
        defer { server.stop() }
        let directory = TemporaryDirectory()
        let secret = try await ProfileEscrowCLI.run(["webhook-secret"], in: directory.path).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let environment = [
            "PROFILE_ESCROW_DATABASE": server.url, "PROFILE_ESCROW_KEYRING": directory.path + "/keyring",
            "PROFILE_ESCROW_WEBHOOK_SECRET": secret,
        ]
        func cli(_ arguments: [String]) async throws -> ProfileEscrowCLI.Result {
            try await ProfileEscrowCLI.run(arguments, environment: environment, in: directory.path)
        }
        let token = try await ProfileEscrowCLI.setUpCaptureNode(
            token: "cluster.pgtest",
            environment: environment,
            in: directory.path
        )

        let backend = try await FakeBackend.start(secret: secret)
        backend.respond(FakeBackend.chaos(failureRate: 0.2))
        defer { Task { await backend.stop() } }
        let processes = ProfileEscrowProcesses(directory: directory.path, environment: environment)
        defer { processes.killAll() }
        let ports = try [freePort(), freePort()]
        @Sendable func startNode(_ index: Int) throws {
            try processes.startCaptureNode("node\(index)", port: ports[index])
        }
        @Sendable func startWorker(_ index: Int) throws {
            try processes.start(
                "worker\(index)",
                [
                    "replay", "--backend", backend.url, "--concurrency", "32", "--lease", "4s", "--delivery-timeout",
                    "2s", "--backoff-base", "50ms", "--backoff-max", "1s", "--poll-interval", "100ms", "--worker-id",
                    "worker\(index)",
                ]
            )
        }
        for index in 0..<2 {
            try startNode(index)
            try startWorker(index)
        }

        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let acknowledged: [String]
        do {
            for port in ports { try await waitUntilHealthy(client, port: port) }
            let answers = NIOLockedValueBox((ids: [String](), statuses: [Int: Int]()))
            let next = NIOLockedValueBox(0)
            try await withThrowingTaskGroup(of: Void.self) { group in
                // 200 clients at a time, each capture sent to the nodes in turn; one that is not acknowledged (a node
                // or the database down) is sent again to the other node, as a registration service would.
                for _ in 0..<200 {
                    group.addTask {
                        while true {
                            let number = next.withLockedValue { value -> Int in
                                defer { value += 1 }
                                return value
                            }
                            guard number < Self.captures else { return }
                            for attempt in 0..<60 {
                                let port = ports[(number + attempt) % 2]
                                let (status, id) = await Self.capture(client, port: port, token: token, number: number)
                                answers.withLockedValue { $0.statuses[status, default: 0] += 1 }
                                // 201 a new escrow; 200 the same user's escrow kept or replaced (a capture that
                                // committed although its answer was lost, sent again).
                                if status == 201 || status == 200, let id {
                                    answers.withLockedValue { $0.ids.append(id) }
                                    break
                                }
                                // A registration service's pause before it tries the other node (real time: the
                                // node and the database are real processes).
                                try await pause(for: .milliseconds(100))
                            }
                        }
                    }
                }
                // The faults, while the captures and deliveries run: a schedule in real time, since the nodes,
                // the workers and the database are real processes. Each fault comes the given time after the one
                // before it.
                let node = Int.random(in: 0..<2)
                let worker = Int.random(in: 0..<2)
                let other = Int.random(in: 0..<2)
                let faults: [(after: Duration, fault: @Sendable () throws -> Void)] = [
                    (.seconds(2), { processes.signal("node\(node)") }),
                    (.milliseconds(500), { try startNode(node) }),
                    (.seconds(1), { processes.signal("worker\(worker)") }),
                    (.milliseconds(500), { try startWorker(worker) }),
                    (.seconds(1), { try server.pgctl(["-m", "immediate", "stop"]) }),
                    (.seconds(3), { try server.pgctl(["-l", server.directory + "/server.log", "-t", "60", "start"]) }),
                    (
                        .seconds(2),
                        {
                            processes.signal("worker\(other)")
                            try startWorker(other)
                        }
                    ),
                ]
                group.addTask {
                    for (after, fault) in faults {
                        try await pause(for: after)
                        try fault()
                    }
                }
                try await group.waitForAll()
            }
            let (ids, statuses) = answers.withLockedValue { ($0.ids, $0.statuses) }
            acknowledged = ids
            print(
                "cluster check: \(ids.count) captures acknowledged; answers by status \(statuses.sorted { $0.key < $1.key })"
            )
            #expect(ids.count == Self.captures, "every capture was acknowledged in the end (retried on failure)")
            #expect(Set(statuses.keys).isSubset(of: [200, 201, 503, -1]), "only 2xx, 503 or no answer: \(statuses)")
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()

        // Every acknowledged escrow confirmed and purged.
        let store = try await PostgresEscrowStore.connect(url: server.url, logger: TestDatabase.logger)
        let wanted = Set(acknowledged)
        var purged: [String: [String]] = [:]
        // Waited for, not required: the expectations below name what is missing. A failed read is "not yet": thrown,
        // it would end the wait at once (as `try?` swallows it) and report every escrow as missing.
        try? await eventually("every acknowledged escrow purged", within: 300, every: .milliseconds(500)) {
            guard let events = try? await allEvents(store) else { return false }
            purged = [:]
            for event in events where event.draft.type == .purged {
                if let id = event.draft.escrowID { purged[id, default: []].append(event.draft.detail ?? "") }
            }
            return wanted.allSatisfy { purged[$0] != nil }
        }
        processes.stopAll()

        let deliveries = backend.requests
        let confirmedByBackend = Set(deliveries.filter { $0.reply == .status(200) }.compactMap(\.escrowID))
        let missing = wanted.filter { purged[$0] == nil }
        #expect(missing.isEmpty, "\(missing.count) acknowledged captures were never purged")
        let notOnce = wanted.filter { purged[$0].map { $0 != ["confirmed"] } ?? false }
        #expect(notOnce.isEmpty, "\(notOnce.count) escrows not purged exactly once as confirmed")
        let unconfirmed = purged.filter { $0.value.contains("confirmed") && !confirmedByBackend.contains($0.key) }
        #expect(unconfirmed.isEmpty, "\(unconfirmed.count) escrows purged as confirmed without a 2xx")
        #expect(deliveries.allSatisfy { $0.signatureValid }, "every delivery is signed with the webhook secret")
        let keys = deliveries.filter { $0.escrowID != nil && $0.idempotencyKey != $0.escrowID }
        #expect(keys.isEmpty, "\(keys.count) deliveries carried another Idempotency-Key than their escrow's id")
        let failed = deliveries.filter { $0.reply != .status(200) }.count
        print(
            "cluster check: \(deliveries.count) deliveries, \(failed) failed on purpose, "
                + "\(deliveries.count - Set(deliveries.compactMap(\.escrowID)).count) redeliveries"
        )
        #expect(failed > 0, "the backend's chaos failed some deliveries")
        await store.close()

        let report = try await cli(["purge-report", "--verify"])
        #expect(report.status == 0, "purge-report --verify: \(report.stdout.suffix(400)) \(report.stderr)")

        // No fake personal data in any log, or in the server's files (tables, WAL).
        for log in processes.logs {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            #expect(!text.contains("example.invalid") && !text.contains("000000.pgtest"), "\(log) holds personal data")
        }
        let grep = try OwnServer.shell([
            "sh", "-c", "grep -rlaE 'example[.]invalid|000000[.]pgtest' \"$0\" || true", server.directory + "/data",
        ]).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(grep.isEmpty, "PostgreSQL's files hold personal data: \(grep)")
    }

    /// One capture; the status (-1 for no HTTP answer) and the escrow id.
    static func capture(_ client: HTTPClient, port: Int, token: String, number: Int) async -> (Int, String?) {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/escrows")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: ServeKillTests.body(900_000 + number)))
        do {
            let response = try await client.execute(request, timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 4096)
            let json = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
            return (Int(response.status.code), json?["escrowId"] as? String)
        } catch {
            return (-1, nil)
        }
    }
}
