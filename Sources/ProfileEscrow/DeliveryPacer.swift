import EscrowCore
import Foundation

/// One worker's share of the cluster's delivery rate (``ReplayWorker/Configuration/deliveryRate``): before a
/// delivery starts it must hold a slot of the schedule every worker shares through the store
/// (``DeliveryRateStore``). Slots are taken a few at a time, at most ``horizon`` ahead, so a batch costs two store
/// round trips and a worker never sits on slots another could use for long. Without a rate every delivery starts at
/// once and the store is never asked.
struct DeliveryPacer {
    let store: any DeliveryRateStore
    let perSecond: Double?
    /// Slots taken, of which the first `used` were used.
    private var slots = DeliverySlots(first: .distantPast, interval: 0, count: 0)
    private var used = 0
    /// When no slot was free at the last ask: when to ask again.
    private var askAt = Date.distantPast

    /// How far ahead of now slots are taken: a second's worth at most, so that the escrows claimed for them wait
    /// for their slot well within their lease.
    static let horizon: Double = 1

    init(store: any DeliveryRateStore, perSecond: Double?) {
        self.store = store
        self.perSecond = perSecond
    }

    /// Nil when a delivery may start now (a slot is used for it); otherwise when to try again. `wanted`: how many
    /// deliveries could start now, the most slots to take at once.
    mutating func admit(wanting wanted: Int, at now: Date) async throws -> Date? {
        guard let perSecond else { return nil }
        if used == slots.count {
            guard now >= askAt else { return askAt }
            slots = try await store.reserveDeliverySlots(wanted, perSecond: perSecond, at: now, horizon: Self.horizon)
            used = 0
            guard slots.count > 0 else {
                askAt = slots.first
                return askAt
            }
        }
        let slot = slots.slot(used)
        guard slot <= now else { return slot }
        used += 1
        return nil
    }

    /// Lets the slots not used yet pass (deliveries paused, the worker stopping).
    mutating func drop() {
        slots.count = 0
        used = 0
    }

    /// The most escrows to claim at once under the rate: about a second's worth, so that none waits in the worker
    /// for its slot longer than its lease allows. `limit` without a rate.
    func claimLimit(_ limit: Int) -> Int {
        guard let perSecond else { return limit }
        return min(limit, max(1, Int(perSecond.rounded(.up))))
    }
}
