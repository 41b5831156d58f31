public import EscrowCore
public import Foundation
import Logging
import PostgresNIO

/// Handled Apple notifications and the outbox of their forwarded copies in the shared database, through the store
/// engine: a notification is applied once, and forwarded by one node at a time, whichever node receives it.
extension PostgresEscrowStore: NotificationOutbox {
    public func recordNotification(
        idHash: [UInt8],
        at now: Date,
        forward: [OutboxEntry],
        capacity: Int
    ) async throws -> NotificationRecording {
        try requireWritable()
        return try await Self.engineTransaction(database, "recording a notification failed") {
            try await StoreEngine.recordNotification(
                idHash: idHash,
                at: now,
                forward: forward,
                capacity: capacity,
                in: $0
            )
        }
    }

    public func hasNotification(idHash: [UInt8]) async throws -> Bool {
        let rows = try await database.rows(
            "read failed",
            "SELECT 1 FROM apple_notification WHERE jti_hash = \(Data(idHash))"
        )
        return !rows.isEmpty
    }

    public func claimOutbox(at now: Date, limit: Int, lease: Double) async throws -> [OutboxEntry] {
        try requireWritable()
        return try await Self.engineTransaction(database, "claiming forwarded notifications failed") {
            try await StoreEngine.claimOutbox(at: now, limit: limit, lease: lease, in: $0)
        }
    }

    public func rescheduleOutbox(webhookID: String, attempts: Int, at next: Date) async throws -> Bool {
        try requireWritable()
        return try await Self.engineTransaction(database, "rescheduling a forwarded notification failed") {
            try await $0.setOutbox(webhookID: webhookID, expected: attempts, attempts: attempts, next: next)
        }
    }

    public func deleteOutbox(webhookID: String) async throws -> Bool {
        try requireWritable()
        return try await Self.engineTransaction(database, "deleting a forwarded notification failed") {
            try await $0.deleteOutbox(webhookID: webhookID)
        }
    }

    public func sweepOutbox(createdBefore cutoff: Date) async throws -> [String] {
        try requireWritable()
        return try await Self.engineTransaction(database, "sweeping forwarded notifications failed") {
            try await $0.deleteOutbox(createdBefore: cutoff)
        }
    }

    public func outboxCount() async throws -> Int {
        let logger = database.logger
        return try await database.withConnection("read failed") { connection in
            try await Self.outboxCount(connection, logger: logger)
        }
    }

    static func outboxCount(_ connection: PostgresConnection, logger: Logger) async throws -> Int {
        let rows = try await connection.query("SELECT COUNT(*) FROM notification_outbox", logger: logger)
            .collect().map { try $0.decode(Int64.self) }
        return Int(rows.first ?? 0)
    }
}
