public import EscrowCore
public import Foundation
import GRDB

extension SQLiteEscrowStore: NotificationLog {
    public func recordNotification(idHash: [UInt8], at now: Date) async throws -> Bool {
        try await write { transaction in
            let db = transaction.db
            try db.execute(
                sql: "INSERT OR IGNORE INTO apple_notification (jti_hash, received_at) VALUES (?, ?)",
                arguments: [Data(idHash), Self.ms(now)]
            )
            return db.changesCount == 1
        }
    }

    public func hasNotification(idHash: [UInt8]) async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM apple_notification WHERE jti_hash = ?)"),
                arguments: [Data(idHash)]
            ) ?? false
        }
    }
}
