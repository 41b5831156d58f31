public import Foundation

/// The cluster's delivery rate as the store keeps it: one row that every worker sharing the store reads and advances.
public struct DeliveryRate: Sendable, Equatable {
    /// The rate the workers last claimed slots with (`--delivery-rate`), deliveries a second for the whole cluster;
    /// nil when the last worker to start or claim had no limit.
    public var perSecond: Double?
    /// The next free delivery slot, in microseconds since 1970 (0 before the first): a whole number, so that a
    /// worker's compare-and-set matches the stored value exactly.
    public var nextSlot: Int64

    /// Never limited, no slot taken: the row as the migration makes it.
    public static let unlimited = DeliveryRate(perSecond: nil, nextSlot: 0)

    public init(perSecond: Double?, nextSlot: Int64) {
        self.perSecond = perSecond
        self.nextSlot = nextSlot
    }
}

/// A shared rate limit for deliveries, kept as the next free slot of the whole cluster (a virtual schedule, as in
/// GCRA): a worker takes a few consecutive slots at once by advancing that one value with a compare-and-set, then
/// starts each delivery at its slot. However many workers share the store, the slots they hold are `1 / rate` apart,
/// so together they never exceed the rate; a worker asks again only when its slots are used, two round trips for a
/// batch. Backoff and `Retry-After` act on each escrow's due time, before any of this: a slot only ever delays a
/// delivery.
public protocol DeliveryRateStore: Sendable {
    /// The row as committed; ``DeliveryRate/unlimited`` when no worker ever wrote it. One primary-key read.
    func deliveryRate() async throws -> DeliveryRate

    /// Sets the next free slot to `nextSlot` and the rate to `perSecond`, only when the next free slot still is
    /// `expected` (another worker took none meanwhile); returns whether it did.
    func advanceDeliverySlot(from expected: Int64, to nextSlot: Int64, perSecond: Double?) async throws -> Bool
}

/// Slots a worker holds: `count` deliveries, the first at ``first``, each next one ``interval`` seconds later.
public struct DeliverySlots: Sendable, Equatable {
    /// The first slot; when ``count`` is 0, the moment a slot will be granted again (ask then).
    public var first: Date
    /// Seconds between two slots: one over the rate.
    public var interval: Double
    public var count: Int

    public init(first: Date, interval: Double, count: Int) {
        self.first = first
        self.interval = interval
        self.count = count
    }

    /// The time of slot `index` (0 ..< ``count``).
    public func slot(_ index: Int) -> Date { first.addingTimeInterval(Double(index) * interval) }

    /// The grant of up to `wanted` slots at `now` when the next free slot is `next` (microseconds): slots start at
    /// the later of the two, are `1 / perSecond` apart, and none is more than `horizon` seconds ahead of `now`
    /// (always at least one when the next free slot is due now). Also the next free slot after the grant.
    static func grant(
        _ wanted: Int,
        next: Int64,
        perSecond: Double,
        at now: Date,
        horizon: Double
    ) -> (slots: DeliverySlots, next: Int64) {
        let step = max(1, Int64((1_000_000 / perSecond).rounded()))
        let nowSlot = Int64((now.timeIntervalSince1970 * 1_000_000).rounded(.down))
        let start = max(next, nowSlot)
        let window = max(Int64(horizon * 1_000_000), step)
        // Slots start .. start + (count - 1) * step all fall before now + window.
        let fitting = start < nowSlot + window ? (nowSlot + window - start + step - 1) / step : 0
        let count = Int(min(Int64(max(0, wanted)), fitting))
        let first = Date(timeIntervalSince1970: Double(count > 0 ? start : start - window + 1) / 1_000_000)
        let slots = DeliverySlots(first: first, interval: Double(step) / 1_000_000, count: count)
        return (slots, start + Int64(count) * step)
    }
}

extension DeliveryRateStore {
    /// Takes up to `wanted` consecutive slots of the cluster's schedule at `perSecond`, none more than `horizon`
    /// seconds after `now` (at least one when one is free now). Retries the compare-and-set while other workers
    /// take slots at the same moment.
    public func reserveDeliverySlots(
        _ wanted: Int,
        perSecond: Double,
        at now: Date,
        horizon: Double
    ) async throws -> DeliverySlots {
        for _ in 0..<Self.contendedAttempts {
            let current = try await deliveryRate()
            let (slots, next) = DeliverySlots.grant(
                wanted,
                next: current.nextSlot,
                perSecond: perSecond,
                at: now,
                horizon: horizon
            )
            guard slots.count > 0 || current.perSecond != perSecond else { return slots }
            if try await advanceDeliverySlot(from: current.nextSlot, to: next, perSecond: perSecond) { return slots }
        }
        throw EscrowStoreError(.busy, "the delivery rate's schedule kept changing under this worker; try again")
    }

    /// Records the rate a worker starts with (nil: none), which `GET /v1/admin/deliveries` shows, leaving the
    /// schedule as it is.
    public func recordDeliveryRate(_ perSecond: Double?) async throws {
        for _ in 0..<Self.contendedAttempts {
            let current = try await deliveryRate()
            guard current.perSecond != perSecond else { return }
            if try await advanceDeliverySlot(from: current.nextSlot, to: current.nextSlot, perSecond: perSecond) {
                return
            }
        }
        throw EscrowStoreError(.busy, "the delivery rate's schedule kept changing under this worker; try again")
    }

    /// Compare-and-set rounds before giving up: far more than workers taking slots at the same instant.
    static var contendedAttempts: Int { 64 }
}
