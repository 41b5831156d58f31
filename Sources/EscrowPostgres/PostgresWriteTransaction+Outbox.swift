import EscrowCore
import Foundation
import PostgresNIO

/// Handled Apple notifications and their outbox in PostgreSQL: a claim locks the due entries it takes
/// (`FOR UPDATE SKIP LOCKED`) and leases them, so forwarders on several nodes never take the same entry at once.
extension PostgresWriteTransaction: OutboxWriteTransaction {
    func insertNotification(idHash: [UInt8], at now: Date) async throws -> Bool {
        let rows = try await connection.query(
            """
            INSERT INTO apple_notification (jti_hash, received_at)
            VALUES (\(Data(idHash)), \(PostgresEscrowStore.ms(now)))
            ON CONFLICT (jti_hash) DO NOTHING RETURNING 1
            """,
            logger: logger
        ).collect()
        return rows.count == 1
    }

    func outboxCount() async throws -> Int {
        try await PostgresEscrowStore.outboxCount(connection, logger: logger)
    }

    func insertOutbox(_ entry: OutboxEntry) async throws -> Bool {
        let rows = try await connection.query(
            """
            INSERT INTO notification_outbox (webhook_id, key_version, sealed_body, attempts, next_attempt_at, created_at)
            VALUES (\(entry.webhookID), \(Int64(entry.keyVersion)), \(Data(entry.sealedBody)), \(Int64(entry.attempts)),
                \(PostgresEscrowStore.ms(entry.nextAttemptAt)), \(PostgresEscrowStore.ms(entry.createdAt)))
            ON CONFLICT (webhook_id) DO NOTHING RETURNING 1
            """,
            logger: logger
        ).collect()
        return rows.count == 1
    }

    func dueOutbox(at now: Date, limit: Int) async throws -> [OutboxEntry] {
        try await connection.query(
            """
            SELECT webhook_id, key_version, sealed_body, attempts, next_attempt_at, created_at FROM notification_outbox
            WHERE next_attempt_at <= \(PostgresEscrowStore.ms(now))
            ORDER BY next_attempt_at LIMIT \(Int64(limit)) FOR UPDATE SKIP LOCKED
            """,
            logger: logger
        ).collect().map { row in
            let (id, version, body, attempts, next, created) = try row.decode(
                (String, Int64, Data, Int64, Int64, Int64).self
            )
            return OutboxEntry(
                webhookID: id,
                // A version outside 32 bits is no version: the forwarder gives the entry up as unknown.
                keyVersion: UInt32(exactly: version) ?? 0,
                sealedBody: [UInt8](body),
                attempts: Int(clamping: attempts),
                nextAttemptAt: Timestamp.date(unixMilliseconds: next),
                createdAt: Timestamp.date(unixMilliseconds: created)
            )
        }
    }

    func setOutbox(webhookID: String, expected: Int?, attempts: Int, next: Date) async throws -> Bool {
        let expected = expected.map(Int64.init)
        let rows = try await connection.query(
            """
            UPDATE notification_outbox SET attempts = \(Int64(attempts)), next_attempt_at = \(PostgresEscrowStore.ms(next))
            WHERE webhook_id = \(webhookID) AND (\(expected)::bigint IS NULL OR attempts = \(expected))
            RETURNING 1
            """,
            logger: logger
        ).collect()
        return rows.count == 1
    }

    func deleteOutbox(webhookID: String) async throws -> Bool {
        let rows = try await connection.query(
            "DELETE FROM notification_outbox WHERE webhook_id = \(webhookID) RETURNING 1",
            logger: logger
        ).collect()
        return rows.count == 1
    }

    func deleteOutbox(createdBefore cutoff: Date) async throws -> [String] {
        try await connection.query(
            """
            DELETE FROM notification_outbox WHERE created_at < \(PostgresEscrowStore.ms(cutoff)) RETURNING webhook_id
            """,
            logger: logger
        ).collect().map { try $0.decode(String.self) }
    }
}
