import EscrowCore
import EscrowCrypto
import EscrowPostgres
import EscrowTestSupport
import Foundation
import Logging
import ProfileEscrow
import Testing

/// Forwarding from one outbox by several nodes: each node's forwarder claims with `FOR UPDATE SKIP LOCKED` and a
/// lease, so every notification reaches the backend once, whichever node queued it.
@Suite("PostgreSQL: forwarded notifications from two nodes")
struct NotificationOutboxPostgresTests {
    @Test("two nodes' forwarders send every queued notification once")
    func twoNodesForwardOnce() async throws {
        try await TestDatabase.with { database in
            let nodes = [try await database.open(), try await database.open()]
            let backend = try await FakeBackend.start(secret: WebhookSecret.generateText())
            // Slow answers: each node claims while the other still sends.
            backend.respond { _, _ in .delayed(0.05, .status(204)) }
            let keyring = Keyring.generate()
            let forwarders = try nodes.map { node in
                NotificationForwarder(
                    NotificationForwarder.Configuration(
                        url: URL(string: backend.url)!,
                        secrets: [try WebhookSecret(backend.secretText)]
                    ),
                    outbox: node,
                    keyring: { keyring },
                    logger: TestDatabase.logger
                )
            }
            let count = 16
            for number in 0..<count {
                let idHash = Hashing.blake2b256(Array("fake-pg-outbox-\(number)".utf8))
                let recorded = try await forwarders[number % 2].record(
                    idHash: idHash,
                    id: "apple-" + Hex.encode(idHash.prefix(16)),
                    body: Array(#"{"type":"apple-notification","fake":\#(number)}"#.utf8),
                    at: Date()
                )
                #expect(recorded == .queued)
            }
            let tasks = forwarders.map { forwarder in Task { try await forwarder.run() } }
            try await eventually("all forwarded and the outbox emptied", within: 30) {
                let left = try await nodes[0].outboxCount()
                return backend.answered.count >= count && left == 0
            }
            // Both stopped, nothing more is sent: the backend's requests are final.
            for task in tasks {
                task.cancel()
                _ = try? await task.value
            }
            let ids = backend.requests.compactMap(\.webhookID)
            #expect(ids.count == count, "each sent once: \(ids.count) requests")
            #expect(Set(ids).count == count)
            await backend.stop()
        }
    }
}
