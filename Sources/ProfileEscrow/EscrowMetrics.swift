public import EscrowCore
public import Foundation
public import Metrics

/// The product metrics, through swift-metrics (the process chooses the backend). Labels are
/// reasons, codes and outcomes only: never an id, never personal data.
public enum EscrowMetrics {
    static func captured() {
        Counter(label: "profile_escrow_captures_total").increment()
    }

    /// A capture the store did not take (unavailable, busy, disk full, a retired key version), by the store's error
    /// code: the caller was told, and must keep the profile and retry. Bad input is not counted here.
    static func captureFailed(_ code: String) {
        Counter(label: "profile_escrow_capture_failures_total", dimensions: [("code", code)]).increment()
    }

    static func purged(_ reason: PurgeReason) {
        Counter(label: "profile_escrow_purges_total", dimensions: [("reason", reason.rawValue)]).increment()
    }

    static func dead(_ code: DeadCode) {
        Counter(label: "profile_escrow_dead_total", dimensions: [("code", code.rawValue)]).increment()
    }

    static func delivered(_ outcome: DeliveryOutcome, seconds: Double) {
        Counter(label: "profile_escrow_deliveries_total", dimensions: [("outcome", outcome.auditName)]).increment()
        Timer(label: "profile_escrow_delivery_duration_seconds").recordNanoseconds(Int64(seconds * 1e9))
    }

    /// What became of a forwarded Apple notification, for `profile_escrow_notifications_forwarded_total{outcome}`.
    public enum ForwardOutcome: String, Sendable, CaseIterable {
        /// The backend took it (2xx).
        case delivered
        /// The backend refused it (4xx): not sent again.
        case rejected
        /// Not taken after the last attempt, or older than the outbox's retention.
        case givenUp = "given_up"
        /// Its sealed body does not open (a key version the keyring no longer has).
        case unopenable
        /// Not queued: the outbox was full.
        case full
    }

    /// Counts forwarded notifications by outcome (`count` of them); the label is the outcome only, never a webhook id.
    static func forwarded(_ outcome: ForwardOutcome, count: Int = 1, factory: any MetricsFactory) {
        guard count > 0 else { return }
        Counter(
            label: "profile_escrow_notifications_forwarded_total",
            dimensions: [("outcome", outcome.rawValue)],
            factory: factory
        ).increment(by: count)
    }

    /// Exposes every outcome of `profile_escrow_notifications_forwarded_total` at 0, so the first give-up is an
    /// increase Prometheus sees (a series first seen at 1 shows none).
    static func forwardingStarted(factory: any MetricsFactory) {
        for outcome in ForwardOutcome.allCases {
            _ = Counter(
                label: "profile_escrow_notifications_forwarded_total",
                dimensions: [("outcome", outcome.rawValue)],
                factory: factory
            )
        }
    }

    /// The entries waiting in the notification outbox (claimed or not), as the forwarder last counted them.
    static func outboxEntries(_ count: Int, factory: any MetricsFactory) {
        Gauge(label: "profile_escrow_notification_outbox_entries", factory: factory).record(count)
    }

    /// 1 while deliveries are paused for every node (the store's switch, as this process last read it), else 0.
    static func deliveriesPaused(_ paused: Bool, factory: any MetricsFactory = MetricsSystem.factory) {
        Gauge(label: "profile_escrow_deliveries_paused", factory: factory).record(paused ? 1 : 0)
    }

    /// The live gauges: live escrows by state (0 for a state with none) and the oldest pending
    /// escrow's age. Their one publisher: the worker calls it after each sweep, `/metrics` at scrape time
    /// with its registry's factory (the same series when the process bootstrapped metrics over that registry).
    public static func live(_ summary: StoreSummary, at now: Date, factory: any MetricsFactory = MetricsSystem.factory)
    {
        for state in EscrowState.live {
            Gauge(label: "profile_escrow_live", dimensions: [("state", state.rawValue)], factory: factory)
                .record(summary.live[state] ?? 0)
        }
        let oldest = summary.oldestPendingCreatedAt.map { max(0, now.timeIntervalSince($0)) } ?? 0
        Gauge(label: "profile_escrow_oldest_pending_age_seconds", factory: factory).record(oldest)
    }
}
