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
        #expect(try cli.run(["keys", "init"]).status == 0)
        let added = try cli.run(["tokens", "add", "durability", "--scope", "capture"])
        #expect(added.status == 0, "\(added.stderr)")
        let token = try #require(added.stdout.split(separator: "\n").last.map(String.init))
        let port = Self.freePort()

        let serve = Process()
        serve.executableURL = CLITests.binary
        serve.arguments = [
            "serve", "--no-worker", "--host", "127.0.0.1", "--port", "\(port)", "--rate-limit", "100000",
            "--rate-burst", "100000",
        ]
        serve.currentDirectoryURL = URL(fileURLWithPath: cli.directory.path)
        var environment = ProcessInfo.processInfo.environment
        environment["PROFILE_ESCROW_DATABASE"] = cli.database
        environment["PROFILE_ESCROW_KEYRING"] = cli.keyring
        serve.environment = environment
        serve.standardOutput = FileHandle.nullDevice
        serve.standardError = FileHandle.nullDevice
        try serve.run()
        defer { if serve.isRunning { kill(serve.processIdentifier, SIGKILL) } }

        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        try await Self.waitUntilHealthy(client, port: port)

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
        serve.waitUntilExit()
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

    /// A port that was free a moment ago (bind to 0, read it back, close).
    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func waitUntilHealthy(_ client: HTTPClient, port: Int) async throws {
        for _ in 0..<150 {
            if let response = try? await client.execute(
                HTTPClientRequest(url: "http://127.0.0.1:\(port)/healthz"),
                timeout: .seconds(1)
            ), response.status == .ok {
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("serve did not become healthy within 15 s")
    }
}
