public import EscrowCore
public import Foundation
import GRDB

extension SQLiteEscrowStore {
    /// Not waiting for the disk (see `write(durable:)`): an event lost in a power cut leaves a count one short.
    public func recordNotificationEvent(_ event: NotificationEvent) async throws {
        try await write(durable: false) { transaction in
            let at = Timestamp.unixMilliseconds(event.at)
            try transaction.db.execute(
                sql: "INSERT INTO apple_notification_event (received_at, event_type, outcome) VALUES (?, ?, ?)",
                arguments: [at, event.type, event.outcome]
            )
            try transaction.db.execute(
                sql: "DELETE FROM apple_notification_event WHERE received_at < ?",
                arguments: [at - Int64(NotificationEvent.retention * 1000)]
            )
        }
    }

    public func notificationEvents(limit: Int) async throws -> [NotificationEvent] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT event_type, outcome, received_at FROM apple_notification_event
                    ORDER BY received_at DESC, rowid DESC LIMIT ?
                    """,
                arguments: [limit]
            ).map { row in
                NotificationEvent(
                    type: row["event_type"],
                    outcome: row["outcome"],
                    at: Timestamp.date(unixMilliseconds: row["received_at"])
                )
            }
        }
    }

    public func notificationEventCounts(since: Date) async throws -> [NotificationEventCount] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT event_type, outcome, COUNT(*) AS count FROM apple_notification_event
                    WHERE received_at >= ? GROUP BY event_type, outcome ORDER BY event_type, outcome
                    """,
                arguments: [Timestamp.unixMilliseconds(since)]
            ).map { NotificationEventCount(type: $0["event_type"], outcome: $0["outcome"], count: $0["count"]) }
        }
    }
}
