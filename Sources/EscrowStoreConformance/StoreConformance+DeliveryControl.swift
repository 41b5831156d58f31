import EscrowCore
import Foundation

/// The delivery switch: one state for every store open on the same data, each change audited once.
extension StoreConformance {
    static let deliveryControlChecks: [Check] = [
        Check(name: "the delivery switch is shared and audited", escrows: deliverySwitchIsSharedAndAudited),
        Check(name: "counts escrows expiring before a time", escrows: countsEscrowsExpiringBefore),
    ]

    static func deliverySwitchIsSharedAndAudited(_ make: MakeStore) async throws {
        // Two stores on the same data: two nodes of one cluster.
        let node = try await make()
        let other = try await make()
        let fixture = Fixture()
        try expect(try await node.deliveryControl() == .running, "deliveries run until paused")

        let pause = AuditDraft(
            type: .deliveriesPaused,
            at: fixture.start,
            actor: .http(token: "ops"),
            reason: "backend deploy"
        )
        try expect(try await node.setDeliveriesPaused(true, audit: pause), "the pause changes the switch")
        let seen = try await other.deliveryControl()
        try expect(
            seen
                == DeliveryControl(
                    paused: true,
                    changedAt: fixture.start,
                    changedBy: .http(token: "ops"),
                    reason: "backend deploy"
                ),
            "the other node sees the pause with its actor, time and reason: \(seen)"
        )
        try expect(
            try await !other.setDeliveriesPaused(true, audit: pause),
            "pausing paused deliveries changes nothing"
        )

        let resume = AuditDraft(
            type: .deliveriesResumed,
            at: fixture.start.addingTimeInterval(60),
            actor: .cli,
            reason: "deploy done"
        )
        // Both nodes resume at once: one changes the switch, the other finds it changed.
        async let first = node.setDeliveriesPaused(false, audit: resume)
        async let second = other.setDeliveriesPaused(false, audit: resume)
        let changes = try await [first, second].filter { $0 }.count
        try expect(changes == 1, "one of two concurrent resumes changes the switch: \(changes)")
        let resumed = try await node.deliveryControl()
        try expect(
            !resumed.paused && resumed.changedBy == .cli && resumed.reason == "deploy done",
            "the resume is recorded: \(resumed)"
        )

        let events = try await node.auditEvents(after: 0, limit: 100)
        let switches = events.map(\.draft).filter { [.deliveriesPaused, .deliveriesResumed].contains($0.type) }
        let described = switches.map { "\($0.type) \($0.actor) \($0.reason ?? "-")" }
        try expect(
            described == ["deliveries-paused http:ops backend deploy", "deliveries-resumed cli deploy done"],
            "one event a change, with its actor and reason: \(described)"
        )
        try await fixture.expectIntactChain(events, of: node, "after pause and resume")
    }

    static func countsEscrowsExpiringBefore(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        // Expiring one, two and three hours after the start.
        for hours in 1...3 {
            let record = try fixture.record(user: hours, retention: Double(hours) * 3600)
            _ = try await store.capture(record, actor: .library)
        }
        let count = try await store.escrowCount(expiringBefore: fixture.start.addingTimeInterval(2.5 * 3600))
        try expect(count == 2, "two expire within two and a half hours: \(count)")
        try expect(try await store.escrowCount(expiringBefore: fixture.start) == 0, "none expires at the start")
    }
}
