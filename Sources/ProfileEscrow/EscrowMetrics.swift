import EscrowCore
import Foundation
import Metrics

/// The metrics of SPEC §10, through swift-metrics (the process chooses the backend). Labels are
/// reasons, codes and outcomes only: never an id, never personal data.
enum EscrowMetrics {
    static func captured() {
        Counter(label: "profile_escrow_captures_total").increment()
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

    static func live(_ summary: StoreSummary, now: Double) {
        for (state, count) in summary.live {
            Gauge(label: "profile_escrow_live", dimensions: [("state", state.rawValue)]).record(count)
        }
        let oldest = summary.oldestPendingCreatedAt.map { max(0, now - $0.timeIntervalSince1970) } ?? 0
        Gauge(label: "profile_escrow_oldest_pending_age_seconds").record(oldest)
    }
}
