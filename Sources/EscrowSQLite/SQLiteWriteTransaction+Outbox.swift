import EscrowCore
import Foundation
import GRDB

/// Handled Apple notifications and their outbox in SQLite: `BEGIN IMMEDIATE` serializes every writer, so a claim
/// needs no row lock.
extension SQLiteWriteTransaction: OutboxWriteTransaction {
    func insertNotification(idHash: [UInt8], at now: Date) throws -> Bool {
        try db.execute(
            sql: "INSERT OR IGNORE INTO apple_notification (jti_hash, received_at) VALUES (?, ?)",
            arguments: [Data(idHash), Timestamp.unixMilliseconds(now)]
        )
        return db.changesCount == 1
    }

    func outboxCount() throws -> Int {
        try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM notification_outbox")) ?? 0
    }

    func insertOutbox(_ entry: OutboxEntry) throws -> Bool {
        try db.execute(
            sql: """
                INSERT INTO notification_outbox
                    (webhook_id, key_version, sealed_body, attempts, next_attempt_at, created_at)
                VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (webhook_id) DO NOTHING
                """,
            arguments: [
                entry.webhookID, Int64(entry.keyVersion), Data(entry.sealedBody), entry.attempts,
                Timestamp.unixMilliseconds(entry.nextAttemptAt), Timestamp.unixMilliseconds(entry.createdAt),
            ]
        )
        return db.changesCount == 1
    }

    func dueOutbox(at now: Date, limit: Int) throws -> [OutboxEntry] {
        try Row.fetchAll(
            db,
            sql: """
                SELECT webhook_id, key_version, sealed_body, attempts, next_attempt_at, created_at
                FROM notification_outbox WHERE next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?
                """,
            arguments: [Timestamp.unixMilliseconds(now), limit]
        ).map { row in
            OutboxEntry(
                webhookID: row["webhook_id"],
                // A version outside 32 bits is no version: the forwarder gives the entry up as unknown.
                keyVersion: UInt32(exactly: row["key_version"] as Int64) ?? 0,
                sealedBody: [UInt8](row["sealed_body"] as Data),
                attempts: Int(clamping: row["attempts"] as Int64),
                nextAttemptAt: Timestamp.date(unixMilliseconds: row["next_attempt_at"]),
                createdAt: Timestamp.date(unixMilliseconds: row["created_at"])
            )
        }
    }

    func setOutbox(webhookID: String, expected: Int?, attempts: Int, next: Date) throws -> Bool {
        try db.execute(
            sql: """
                UPDATE notification_outbox SET attempts = ?, next_attempt_at = ?
                WHERE webhook_id = ? AND (? IS NULL OR attempts = ?)
                """,
            arguments: [attempts, Timestamp.unixMilliseconds(next), webhookID, expected, expected]
        )
        return db.changesCount == 1
    }

    func deleteOutbox(webhookID: String) throws -> Bool {
        try db.execute(sql: "DELETE FROM notification_outbox WHERE webhook_id = ?", arguments: [webhookID])
        return db.changesCount == 1
    }

    func deleteOutbox(createdBefore cutoff: Date) throws -> [String] {
        let cutoff = Timestamp.unixMilliseconds(cutoff)
        let ids = try String.fetchAll(
            db,
            sql: "SELECT webhook_id FROM notification_outbox WHERE created_at < ?",
            arguments: [cutoff]
        )
        try db.execute(sql: "DELETE FROM notification_outbox WHERE created_at < ?", arguments: [cutoff])
        return ids
    }
}
