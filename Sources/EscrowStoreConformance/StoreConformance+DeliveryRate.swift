import EscrowCore
import Foundation

/// The delivery rate's schedule: one for every store open on the same data, each slot taken once.
extension StoreConformance {
    static let deliveryRateChecks: [Check] = [
        Check(name: "delivery slots come from one shared schedule", escrows: deliverySlotsAreShared),
        Check(name: "concurrent workers never share a delivery slot", escrows: concurrentWorkersShareNoSlot),
    ]

    /// A tenth of a second, in microseconds: the slot interval at 10 deliveries a second.
    private static let tenth: Int64 = 100_000

    static func deliverySlotsAreShared(_ make: MakeStore) async throws {
        // Two stores on the same data: two nodes of one cluster.
        let node = try await make()
        let other = try await make()
        let now = Fixture().start
        let nowSlot = Int64(now.timeIntervalSince1970 * 1_000_000)
        try expect(try await node.deliveryRate() == .unlimited, "no rate and no slot before any worker")

        let first = try await node.reserveDeliverySlots(3, perSecond: 10, at: now, horizon: 1)
        try expect(first == DeliverySlots(first: now, interval: 0.1, count: 3), "three slots from now: \(first)")
        let seen = try await other.deliveryRate()
        try expect(
            seen == DeliveryRate(perSecond: 10, nextSlot: nowSlot + 3 * tenth),
            "the other node sees the rate and the next free slot: \(seen)"
        )
        // The other node's slots follow, and stop at the horizon: 0.3 s to 0.9 s are seven.
        let second = try await other.reserveDeliverySlots(20, perSecond: 10, at: now, horizon: 1)
        try expect(
            second.count == 7 && abs(second.first.timeIntervalSince(now) - 0.3) < 0.000_001,
            "the next slots follow the first node's, up to the horizon: \(second)"
        )
        let none = try await node.reserveDeliverySlots(5, perSecond: 10, at: now, horizon: 1)
        try expect(
            none.count == 0 && none.first > now && none.first <= now.addingTimeInterval(0.1),
            "none past the horizon, and when to ask again: \(none)"
        )
        // Later, slots start from the present: idle time is not saved up as a burst.
        let later = now.addingTimeInterval(60)
        let fresh = try await node.reserveDeliverySlots(2, perSecond: 10, at: later, horizon: 1)
        try expect(fresh == DeliverySlots(first: later, interval: 0.1, count: 2), "slots from the present: \(fresh)")

        try await other.recordDeliveryRate(nil)
        let unlimited = try await node.deliveryRate()
        let laterSlot = Int64(later.timeIntervalSince1970 * 1_000_000)
        try expect(
            unlimited.perSecond == nil && unlimited.nextSlot == laterSlot + 2 * tenth,
            "a worker without a rate records none and keeps the schedule: \(unlimited)"
        )
    }

    static func concurrentWorkersShareNoSlot(_ make: MakeStore) async throws {
        let nodes = [try await make(), try await make()]
        let now = Fixture().start
        // Eight workers on two nodes take two slots each at the same moment.
        let grants = try await withThrowingTaskGroup(of: DeliverySlots.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    try await nodes[worker % 2].reserveDeliverySlots(2, perSecond: 10, at: now, horizon: 10)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let slots = grants.flatMap { grant in (0..<grant.count).map { grant.slot($0) } }.sorted()
        try expect(slots.count == 16, "every worker got its two slots: \(slots.count)")
        let gaps = zip(slots, slots.dropFirst()).map { ($1.timeIntervalSince($0) * 1000).rounded() }
        try expect(gaps.allSatisfy { $0 == 100 }, "one slot every 100 ms, none shared: \(gaps)")
        try expect(slots.first == now, "the schedule starts at the first worker's moment")
    }
}
