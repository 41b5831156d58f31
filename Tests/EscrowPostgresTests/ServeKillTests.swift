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

/// A `serve` node on PostgreSQL killed with SIGKILL in the middle of concurrent captures: every capture it
/// acknowledged (201) is in the database, and the audit chain still verifies.
@Suite("PostgreSQL: kill -9 of a serve node during captures")
struct ServeKillTests {
    @Test func acknowledgedCapturesSurviveSIGKILL() async throws {
        try await TestDatabase.with { database in
            let directory = TemporaryDirectory()
            let environment = [
                "PROFILE_ESCROW_DATABASE": database.url,
                "PROFILE_ESCROW_KEYRING": directory.path + "/keyring",
            ]
            let token = try await ProfileEscrowCLI.setUpCaptureNode(
                token: "fault.pgtest",
                environment: environment,
                in: directory.path
            )
            let port = try freePort()
            let processes = ProfileEscrowProcesses(directory: directory.path, environment: environment)
            defer { processes.killAll() }
            let serve = try processes.startCaptureNode("serve", port: port)

            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            try await waitUntilHealthy(client, port: port)

            // 64 clients capture one after another, without end, and serve is killed once 200 were acknowledged:
            // whatever the machine's speed, the kill lands with captures in flight (each client stops at its first
            // unanswered capture).
            let clients = 64
            let acknowledgedCount = NIOLockedValueBox(0)
            let cutOff = NIOLockedValueBox(0)
            let acknowledged = try await withThrowingTaskGroup(of: [String].self) { group in
                for clientNumber in 0..<clients {
                    group.addTask {
                        var ids: [String] = []
                        for round in 0..<10_000 {
                            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/escrows")
                            request.method = .POST
                            request.headers.add(name: "Authorization", value: "Bearer \(token)")
                            request.headers.add(name: "Content-Type", value: "application/json")
                            request.body = .bytes(ByteBuffer(string: Self.body(round * clients + clientNumber)))
                            guard let response = try? await client.execute(request, timeout: .seconds(30)),
                                let body = try? await response.body.collect(upTo: 4096),
                                response.status == .created,
                                let json = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))
                                    as? [String: Any],
                                let id = json["escrowId"] as? String
                            else {
                                cutOff.withLockedValue { $0 += 1 }
                                return ids
                            }
                            acknowledgedCount.withLockedValue { $0 += 1 }
                            ids.append(id)
                        }
                        return ids
                    }
                }
                group.addTask {
                    // Polled every millisecond: the kill must land while captures are in flight.
                    try await eventually("200 acknowledged captures", within: 300, every: .milliseconds(1)) {
                        acknowledgedCount.withLockedValue { $0 } >= 200
                    }
                    kill(serve.processIdentifier, SIGKILL)
                    return []
                }
                return try await group.reduce(into: [String]()) { $0.append(contentsOf: $1) }
            }
            await serve.exited()
            try await client.shutdown()
            #expect(serve.terminationReason == .uncaughtSignal, "serve was killed, not stopped")
            #expect(acknowledged.count >= 200, "\(acknowledged.count) acknowledged")
            #expect(cutOff.withLockedValue { $0 } == clients, "every client had a capture cut off by the kill")

            let store = try await database.open()
            for id in acknowledged {
                let found = try await store.record(id: try #require(EscrowID(hex: id)))
                #expect(found != nil, "acknowledged escrow \(id) is missing after SIGKILL")
            }
            let events = try await allEvents(store)
            var verifier = AuditChain.Verifier()
            for event in events { verifier.consume(event) }
            verifier.finish(head: try await store.auditHead())
            #expect(verifier.isIntact, "the audit chain survives the kill")
            #expect(events.filter { $0.draft.type == .captured }.count >= acknowledged.count)
            await store.close()
        }
    }

    static func body(_ number: Int) -> String {
        """
        {"userIdentifier":"000000.pgtest\(String(format: "%020d", number)).0002",\
        "email":"fake\(number)@example.invalid"}
        """
    }
}
