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
