public import EscrowCore
public import Foundation

extension OperatorActions {
    /// How far ahead ``deliveries()`` counts the escrows retention will purge: a pause is meant to last hours, and
    /// whatever expires meanwhile is purged undelivered.
    public static let expiringWindow: TimeInterval = 86_400

    /// The delivery switch as an operator sees it: paused or not, who changed it last, when and why, and what
    /// retention purges within ``OperatorActions/expiringWindow`` (retention is never held by a pause).
    public struct DeliveriesView: Sendable, Equatable {
        public var control: DeliveryControl
        /// Escrows held now that expire within ``OperatorActions/expiringWindow``.
        public var expiringWhilePaused: Int
        /// The cluster's delivery rate limit per second, as the workers last recorded it (`--delivery-rate`); nil when
        /// there is none.
        public var ratePerSecond: Double?
    }

    /// A pause or resume: whether it changed the switch (false: deliveries already were so), and the switch after it.
    public struct DeliveriesChange: Sendable, Equatable {
        public var changed: Bool
        public var deliveries: DeliveriesView
    }

    /// The delivery switch, read now from the store (three cheap reads: its row, the rate's and a range of the expiry
    /// index).
    public func deliveries() async throws -> DeliveriesView {
        let now = escrow.configuration.clock.now()
        return DeliveriesView(
            control: try await escrow.store.deliveryControl(),
            expiringWhilePaused: try await escrow.store.escrowCount(
                expiringBefore: now.addingTimeInterval(Self.expiringWindow)
            ),
            ratePerSecond: try await escrow.store.deliveryRate().perSecond
        )
    }

    /// Pauses deliveries on every node sharing the store: each worker claims nothing from its next poll on, and
    /// deliveries in flight finish. Captures and retention go on. Audited as `deliveries-paused` with `actor` and
    /// `reason`, once: pausing paused deliveries changes and appends nothing.
    public func pauseDeliveries(reason: OperatorReason, actor: AuditActor) async throws -> DeliveriesChange {
        try await switchDeliveries(paused: true, reason: reason, actor: actor)
    }

    /// Resumes deliveries on every node: each worker claims again at its next poll. Audited as `deliveries-resumed`
    /// with `actor` and `reason`, once: resuming running deliveries changes and appends nothing.
    public func resumeDeliveries(reason: OperatorReason, actor: AuditActor) async throws -> DeliveriesChange {
        try await switchDeliveries(paused: false, reason: reason, actor: actor)
    }

    private func switchDeliveries(
        paused: Bool,
        reason: OperatorReason,
        actor: AuditActor
    ) async throws
        -> DeliveriesChange
    {
        let audit = AuditDraft(
            type: paused ? .deliveriesPaused : .deliveriesResumed,
            at: escrow.configuration.clock.now(),
            actor: actor,
            reason: reason.text
        )
        let changed = try await escrow.store.setDeliveriesPaused(paused, audit: audit)
        EscrowMetrics.deliveriesPaused(paused)
        return DeliveriesChange(changed: changed, deliveries: try await deliveries())
    }
}
