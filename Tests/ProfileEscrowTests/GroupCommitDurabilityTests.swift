import AsyncHTTPClient
import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import ProfileEscrow
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Group commit must not weaken durability: a capture acknowledged by `serve` (many captures sharing one
/// commit) is on disk before the 2xx leaves, so it survives a SIGKILL right after the acknowledgement.
@Suite("Group commit durability")
struct GroupCommitDurabilityTests {
    @Test func capturesAcknowledgedUnderGroupCommitSurviveSIGKILL() async throws {
        let cli = CLITests()
        await #expect(try cli.run(["keys", "init"]).status == 0)
        let added = try await cli.run(["tokens", "add", "durability", "--scope", "capture"])
        #expect(added.status == 0, "\(added.stderr)")
        let token = try #require(added.stdout.split(separator: "\n").last.map(String.init))
        let port = try freePort()
        let processes = ProfileEscrowProcesses(
            directory: cli.directory.path,
            environment: ["PROFILE_ESCROW_DATABASE": cli.database, "PROFILE_ESCROW_KEYRING": cli.keyring]
        )
        defer { processes.killAll() }
        let serve = try processes.startCaptureNode("serve", port: port)

        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        try await waitUntilHealthy(client, port: port)

        // 400 concurrent captures; SIGKILL the moment the last acknowledgement arrives.
        let acknowledged = try await withThrowingTaskGroup(of: String?.self) { group in
            for number in 0..<400 {
                group.addTask {
                    var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/escrows")
                    request.method = .POST
                    request.headers.add(name: "Authorization", value: "Bearer \(token)")
                    request.headers.add(name: "Content-Type", value: "application/json")
                    request.body = .bytes(ByteBuffer(string: CLITests.body(1000 + number)))
                    let response = try await client.execute(request, timeout: .seconds(30))
                    let body = try await response.body.collect(upTo: 4096)
                    guard response.status == .created,
                        let json = try JSONSerialization.jsonObject(with: Data(body.readableBytesView))
                            as? [String: Any]
                    else { return nil }
                    return json["escrowId"] as? String
                }
            }
            return try await group.reduce(into: [String]()) { if let id = $1 { $0.append(id) } }
        }
        kill(serve.processIdentifier, SIGKILL)
        await serve.exited()
        try await client.shutdown()
        #expect(acknowledged.count == 400, "every capture was acknowledged")

        // Every acknowledged escrow is in the store after the kill.
        var readOnly = SQLiteEscrowStore.Configuration()
        readOnly.readOnly = true
        let store = try SQLiteEscrowStore(path: cli.database, configuration: readOnly, logger: Logger(label: "t"))
        for id in acknowledged {
            let record = try await store.record(id: try #require(EscrowID(hex: id)))
            #expect(record != nil, "acknowledged escrow \(id) is missing after SIGKILL")
        }
        var verifier = AuditChain.Verifier()
        var cursor: Int64 = 0
        while true {
            let page = try await store.auditEvents(after: cursor, limit: 500)
            guard let last = page.last else { break }
            for event in page { verifier.consume(event) }
            cursor = last.sequence
        }
        verifier.finish(head: try await store.auditHead())
        #expect(verifier.isIntact, "the audit chain survives the kill")
        #expect(verifier.eventCount >= 400)
    }
}
