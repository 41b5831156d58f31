public import EscrowCore
public import Foundation
import PostgresNIO

extension PostgresEscrowStore {
    public func recordNotificationEvent(_ event: NotificationEvent) async throws {
        try requireWritable()
        let at = Self.ms(event.at)
        let cutoff = at - Int64(NotificationEvent.retention * 1000)
        _ = try await database.rows(
            "recording a notification failed",
            """
            WITH swept AS (DELETE FROM apple_notification_event WHERE received_at < \(cutoff))
            INSERT INTO apple_notification_event (received_at, event_type, outcome)
            VALUES (\(at), \(event.type), \(event.outcome))
            """
        )
    }

    public func notificationEvents(limit: Int) async throws -> [NotificationEvent] {
        let rows = try await database.rows(
            "read failed",
            """
            SELECT event_type, outcome, received_at FROM apple_notification_event
            ORDER BY received_at DESC LIMIT \(Int64(limit))
            """
        )
        return try rows.map { row in
            let (type, outcome, at) = try decode(row, (String, String, Int64).self)
            return NotificationEvent(type: type, outcome: outcome, at: Timestamp.date(unixMilliseconds: at))
        }
    }

    public func notificationEventCounts(since: Date) async throws -> [NotificationEventCount] {
        let rows = try await database.rows(
            "read failed",
            """
            SELECT event_type, outcome, COUNT(*) FROM apple_notification_event
            WHERE received_at >= \(Self.ms(since)) GROUP BY event_type, outcome ORDER BY event_type, outcome
            """
        )
        return try rows.map { row in
            let (type, outcome, count) = try decode(row, (String, String, Int64).self)
            return NotificationEventCount(type: type, outcome: outcome, count: Int(count))
        }
    }
}
