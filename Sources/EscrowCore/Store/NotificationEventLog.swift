public import Foundation

/// One verified Apple notification as the operator sees it: its type, what it did, and when. Never its subject, an
/// email or its `jti`.
public struct NotificationEvent: Sendable, Equatable {
    /// `consent-revoked`, `account-delete`, `email-disabled`, `email-enabled`, or `unknown`.
    public var type: String
    /// What handling it did: `purged`, `not-held`, `updated`, `duplicate`, `ignored`, …
    public var outcome: String
    public var at: Date

    public init(type: String, outcome: String, at: Date) {
        self.type = type
        self.outcome = outcome
        self.at = at
    }
}

/// How many notifications of one type had one outcome.
public struct NotificationEventCount: Sendable, Equatable {
    public var type: String
    public var outcome: String
    public var count: Int

    public init(type: String, outcome: String, count: Int) {
        self.type = type
        self.outcome = outcome
        self.count = count
    }
}

/// The Apple notifications every node received, by type and outcome, for the operator's overview and the console's
/// list: kept ``NotificationEvent/retention`` and swept as new ones come.
public protocol NotificationEventLog: Sendable {
    /// Records one handled notification and deletes those older than `event.at` minus
    /// ``NotificationEvent/retention``.
    func recordNotificationEvent(_ event: NotificationEvent) async throws

    /// The last `limit` notifications, the newest first.
    func notificationEvents(limit: Int) async throws -> [NotificationEvent]

    /// Counts by type and outcome of those received at or after `since`, by type then outcome.
    func notificationEventCounts(since: Date) async throws -> [NotificationEventCount]
}

extension NotificationEvent {
    /// How long a notification is listed: a week, past the overview's day.
    public static let retention: Double = 7 * 86_400
}
