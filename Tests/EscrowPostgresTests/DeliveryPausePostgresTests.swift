import EscrowCore
import EscrowCrypto
import EscrowPostgres
import EscrowTestSupport
import Foundation
import ProfileEscrow
import ServiceLifecycle
import Testing

/// The delivery switch across two nodes on one PostgreSQL database: paused on one, the other's worker stops; resumed
/// on the other, both deliver.
@Suite("PostgreSQL: deliveries paused for every node")
struct DeliveryPausePostgresTests {
    @Test("paused on node A, node B's worker claims nothing while captures go on; resumed on B, every escrow delivered")
    func pauseOnOneNodeHoldsTheOther() async throws {
        try await TestDatabase.with { database in
            let keyring = Keyring.generate()
            let escrows = [try await database.open(), try await database.open()].map { store in
                Escrow(store: store, keyring: keyring, logger: TestDatabase.logger)
            }
            let secret = WebhookSecret.generateText()
            let backend = try await FakeBackend.start(secret: secret)
            backend.respond { _, _ in .status(200) }
            let paused = try await OperatorActions(escrow: escrows[0]).pauseDeliveries(
                reason: try OperatorActions.reason("INC-7 backend deploy"),
                actor: .http(token: "node-a")
            )
            #expect(paused.changed && paused.deliveries.control.paused)

            for number in 1...4 { _ = try await escrows[number % 2].capture(try Fake.profile(number)) }
            var configuration = try ReplayWorker.Configuration(backendURL: backend.url, webhookSecret: secret)
            configuration.workerID = "node-b"
            configuration.pollInterval = 0.02
            let worker = try ReplayWorker(escrow: escrows[1], configuration: configuration, logger: TestDatabase.logger)
            let group = ServiceGroup(services: [worker], logger: TestDatabase.logger)
            let running = Task { try await group.run() }
            try await Task.sleep(for: .milliseconds(500))  // 25 polls of node B's worker
            #expect(backend.requests.count == 0, "nothing delivered while paused")
            let summary = try await escrows[1].store.summary(at: Date())
            #expect(summary.live[.pending] == 4, "all four still pending, none leased")

            let seen = try await OperatorActions(escrow: escrows[1]).deliveries()
            #expect(seen.control.changedBy == .http(token: "node-a") && seen.control.reason == "INC-7 backend deploy")
            let resumed = try await OperatorActions(escrow: escrows[1]).resumeDeliveries(
                reason: try OperatorActions.reason("INC-7 done"),
                actor: .http(token: "node-b")
            )
            #expect(resumed.changed && !resumed.deliveries.control.paused)
            try await eventually("all four delivered after the resume", within: 30) {
                try await escrows[0].store.summary(at: Date()).live.values.reduce(0, +) == 0
            }
            #expect(backend.requests.count == 4)
            await group.triggerGracefulShutdown()
            try await bounded("shutdown", within: 20) { try await running.value }
            await backend.stop()

            let switches = try await allEvents(escrows[0].store).map(\.draft).filter {
                $0.type == .deliveriesPaused || $0.type == .deliveriesResumed
            }
            #expect(switches.map(\.actor) == [.http(token: "node-a"), .http(token: "node-b")])
            #expect(switches.map(\.reason) == ["INC-7 backend deploy", "INC-7 done"])
        }
    }
}
