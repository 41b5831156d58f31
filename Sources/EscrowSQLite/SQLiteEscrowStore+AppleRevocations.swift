public import EscrowCore
public import Foundation
import GRDB

/// Revocations of Apple tokens beside the escrows, through the store engine.
extension SQLiteEscrowStore: AppleRevocationStore {
    public func queueAppleRevocation(_ revocation: AppleRevocation) async throws {
        try await write { transaction in
            try transaction.db.execute(
                sql: """
                    INSERT INTO apple_revocation (id, client_id, token_type_hint, key_version, sealed_token, attempts,
                        next_attempt_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    revocation.id, revocation.clientID, revocation.tokenTypeHint, Int64(revocation.keyVersion),
                    Data(revocation.sealedToken), revocation.attempts,
                    Timestamp.unixMilliseconds(revocation.nextAttemptAt),
                    Timestamp.unixMilliseconds(revocation.createdAt),
                ]
            )
        }
    }

    public func claimAppleRevocations(at now: Date, limit: Int, lease: Double) async throws -> [AppleRevocation] {
        try await write(durable: false) {
            try await StoreEngine.claimAppleRevocations(at: now, limit: limit, lease: lease, in: $0)
        }
    }

    public func rescheduleAppleRevocation(id: String, attempts: Int, at next: Date) async throws -> Bool {
        try await write(durable: false) {
            try $0.setAppleRevocation(id: id, expected: attempts, attempts: attempts, next: next)
        }
    }

    public func endAppleRevocation(
        id: String,
        attempts: Int,
        outcome: AppleRevocation.Outcome,
        at now: Date,
        actor: AuditActor
    ) async throws -> Bool {
        try await write {
            try await StoreEngine.endAppleRevocation(
                id: id,
                attempts: attempts,
                outcome: outcome,
                at: now,
                actor: actor,
                in: $0
            )
        }
    }

    public func appleRevocation(id: String) async throws -> AppleRevocation? {
        try await read { db in
            try Row.fetchOne(
                db,
                sql: "SELECT \(SQLiteWriteTransaction.revocationColumns) FROM apple_revocation WHERE id = ?",
                arguments: [id]
            ).flatMap(SQLiteWriteTransaction.revocation)
        }
    }
}

extension SQLiteEscrowStore {
    public func appleRevocationCounts() async throws -> AppleRevocationCounts {
        try await read { db in
            AppleRevocationCounts(
                rows: try Row.fetchAll(db, sql: AppleRevocationCounts.sql).map { ($0[0], $0[1]) }
            )
        }
    }
}

extension SQLiteWriteTransaction: AppleRevocationWriteTransaction {
    func dueAppleRevocations(at now: Date, limit: Int) throws -> [AppleRevocation] {
        try Row.fetchAll(
            db,
            sql: "SELECT \(Self.revocationColumns) FROM apple_revocation "
                + "WHERE ended_at IS NULL AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?",
            arguments: [Timestamp.unixMilliseconds(now), limit]
        ).compactMap(Self.revocation)
    }

    func setAppleRevocation(id: String, expected: Int, attempts: Int, next: Date) throws -> Bool {
        try db.execute(
            sql: """
                UPDATE apple_revocation SET attempts = ?, next_attempt_at = ?
                WHERE id = ? AND attempts = ? AND ended_at IS NULL
                """,
            arguments: [attempts, Timestamp.unixMilliseconds(next), id, expected]
        )
        return db.changesCount == 1
    }

    func endAppleRevocation(id: String, expected: Int, outcome: AppleRevocation.Outcome, at now: Date) throws -> Bool {
        let (name, error) = AppleRevocation.stored(outcome)
        try db.execute(
            sql: """
                UPDATE apple_revocation SET sealed_token = X'', outcome = ?, error = ?, ended_at = ?
                WHERE id = ? AND attempts = ? AND ended_at IS NULL
                """,
            arguments: [name, error, Timestamp.unixMilliseconds(now), id, expected]
        )
        return db.changesCount == 1
    }

    static let revocationColumns = """
        id, client_id, token_type_hint, key_version, sealed_token, attempts, next_attempt_at, created_at, outcome, \
        error, ended_at
        """

    /// A row as a revocation; nil for one whose key version is outside 32 bits.
    static func revocation(_ row: Row) -> AppleRevocation? {
        guard let keyVersion = UInt32(exactly: row["key_version"] as Int64) else { return nil }
        return AppleRevocation(
            id: row["id"],
            clientID: row["client_id"],
            tokenTypeHint: row["token_type_hint"],
            keyVersion: keyVersion,
            sealedToken: [UInt8](row["sealed_token"] as Data),
            attempts: Int(clamping: row["attempts"] as Int64),
            nextAttemptAt: Timestamp.date(unixMilliseconds: row["next_attempt_at"]),
            createdAt: Timestamp.date(unixMilliseconds: row["created_at"]),
            outcome: AppleRevocation.outcome(stored: row["outcome"], error: row["error"]),
            endedAt: (row["ended_at"] as Int64?).map(Timestamp.date(unixMilliseconds:))
        )
    }
}
