import EscrowCore
import EscrowSQLite
import EscrowTestSupport
import Foundation
import Logging
import ServiceLifecycle
import Testing

@testable import ProfileEscrow

/// The worker and the delivery switch, flipped by another node: a second store on the same SQLite file.
@Suite("Replay worker: paused deliveries")
struct DeliveryPauseWorkerTests {
    static func change(_ paused: Bool, on store: SQLiteEscrowStore) async throws {
        let audit = AuditDraft(
            type: paused ? .deliveriesPaused : .deliveriesResumed,
            at: Date(),
            actor: .cli,
            reason: "test"
        )
        #expect(try await store.setDeliveriesPaused(paused, audit: audit))
    }

    @Test("paused by another node: no claim at all while retention still sweeps; resumed: every escrow delivered")
    func pausedWorkerClaimsNothingButSweeps() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .status(200) }
        let otherNode = try SQLiteEscrowStore(path: fixture.harness.databasePath, logger: Logger(label: "test"))
        try await Self.change(true, on: otherNode)
        try await fixture.capture(0..<3)
        // Past their 30 days of retention: swept as expired, paused or not.
        try await fixture.capture(3..<5, ago: 31 * 86_400)

        let counting = ObservedStore(fixture.store)
        let worker = try ReplayWorker(
            escrow: fixture.escrow(over: counting),
            configuration: try fixture.configuration(),
            logger: Logger(label: "test")
        )
        let once = try await worker.runOnce()
        #expect(once.delivered == 0 && once.expiredSwept == 2, "runOnce sweeps and claims nothing: \(once)")

        let group = ServiceGroup(services: [worker], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        try await Task.sleep(for: .milliseconds(500))  // 25 polls
        #expect(counting.claims == 0, "no claim transaction while paused")
        #expect(fixture.stub.requests.count == 0, "nothing delivered while paused")
        #expect(try await fixture.store.summary(at: Date()).live[.pending] == 3)

        try await Self.change(false, on: otherNode)
        try await eventually("every escrow delivered after the resume", within: 20) {
            try await fixture.store.summary(at: Date()).live.values.reduce(0, +) == 0
        }
        #expect(fixture.stub.requests.count == 3)
        #expect(counting.claims > 0)
        await group.triggerGracefulShutdown()
        try await bounded("shutdown", within: 20) { try await running.value }
    }
}
