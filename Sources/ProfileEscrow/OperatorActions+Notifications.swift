public import EscrowCore
import Foundation

extension OperatorActions {
    /// How many of the last Apple notifications the console lists.
    public static let notificationListLimit = 100

    /// The last Apple notifications every node received, newest first: type, time and outcome, never a subject.
    public func notificationEvents(limit: Int = notificationListLimit) async throws -> [NotificationEvent] {
        try await escrow.store.notificationEvents(limit: limit)
    }

    /// Apple notifications received over the overview's window (``AdminOverview/window``), by type and outcome.
    public func notificationCounts() async throws -> [NotificationEventCount] {
        let now = escrow.configuration.clock.now()
        return try await escrow.store.notificationEventCounts(since: now.addingTimeInterval(-AdminOverview.window))
    }
}
