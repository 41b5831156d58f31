public import EscrowCore
public import Foundation
import PostgresNIO

/// Handled Apple notifications in the shared database: a notification is applied once, whichever node receives it.
extension PostgresEscrowStore: NotificationLog {
    public func recordNotification(idHash: [UInt8], at now: Date) async throws -> Bool {
        try requireWritable()
        let rows = try await database.rows(
            "recording a notification failed",
            """
            INSERT INTO apple_notification (jti_hash, received_at) VALUES (\(Data(idHash)), \(Self.ms(now)))
            ON CONFLICT (jti_hash) DO NOTHING RETURNING 1
            """
        )
        return rows.count == 1
    }

    public func hasNotification(idHash: [UInt8]) async throws -> Bool {
        let rows = try await database.rows(
            "read failed",
            "SELECT 1 FROM apple_notification WHERE jti_hash = \(Data(idHash))"
        )
        return !rows.isEmpty
    }
}
