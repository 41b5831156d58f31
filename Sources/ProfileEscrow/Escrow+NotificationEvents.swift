import EscrowCore
import Foundation
import Logging
import Metrics

extension Escrow {
    /// Counts a verified Apple notification by `type` (`consent-revoked`, `account-delete`, `email-disabled`,
    /// `email-enabled`, `unknown`) and `outcome` (what handling it did, `duplicate` for one handled before): in
    /// `profile_escrow_apple_notifications_total{type,outcome}` and in the store's list, which the overview and the
    /// console read for every node. Never its subject. A store that fails here is logged: the notification was
    /// handled all the same.
    public func noteNotification(type: String, outcome: String) async {
        EscrowMetrics.appleNotification(type: type, outcome: outcome)
        do {
            try await store.recordNotificationEvent(NotificationEvent(type: type, outcome: outcome, at: clock.now()))
        } catch {
            logger.warning(
                "recording an Apple notification for the overview failed",
                metadata: ["event": "\(type)", "error": "\(error)"]
            )
        }
    }
}

extension EscrowMetrics {
    /// A verified Apple notification, by its type and outcome (both from short fixed lists, never what Apple sent
    /// beyond the known type names).
    static func appleNotification(type: String, outcome: String) {
        Counter(
            label: "profile_escrow_apple_notifications_total",
            dimensions: [("type", type), ("outcome", outcome)]
        ).increment()
    }
}
