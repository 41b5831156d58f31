public import EscrowCore
public import Foundation
import PostgresNIO

/// Revocations of Apple tokens in the shared database, through the store engine: whichever node queued one, one node
/// at a time sends it.
extension PostgresEscrowStore: AppleRevocationStore {
    public func queueAppleRevocation(_ revocation: AppleRevocation) async throws {
        try requireWritable()
        _ = try await database.rows(
            "queueing an Apple token revocation failed",
            """
            INSERT INTO apple_revocation (id, client_id, token_type_hint, key_version, sealed_token, attempts,
                next_attempt_at, created_at)
            VALUES (\(revocation.id), \(revocation.clientID), \(revocation.tokenTypeHint),
                \(Int64(revocation.keyVersion)), \(Data(revocation.sealedToken)), \(Int64(revocation.attempts)),
                \(Self.ms(revocation.nextAttemptAt)), \(Self.ms(revocation.createdAt)))
            """
        )
    }

    public func claimAppleRevocations(at now: Date, limit: Int, lease: Double) async throws -> [AppleRevocation] {
        try requireWritable()
        return try await Self.engineTransaction(database, "claiming Apple token revocations failed") {
            try await StoreEngine.claimAppleRevocations(at: now, limit: limit, lease: lease, in: $0)
        }
    }

    public func rescheduleAppleRevocation(id: String, attempts: Int, at next: Date) async throws -> Bool {
        try requireWritable()
        return try await Self.engineTransaction(database, "rescheduling an Apple token revocation failed") {
            try await $0.setAppleRevocation(id: id, expected: attempts, attempts: attempts, next: next)
        }
    }

    public func endAppleRevocation(
        id: String,
        attempts: Int,
        outcome: AppleRevocation.Outcome,
        at now: Date,
        actor: AuditActor
    ) async throws -> Bool {
        try requireWritable()
        return try await Self.engineTransaction(database, "ending an Apple token revocation failed") {
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
        try await database.rows(
            "reading an Apple token revocation failed",
            "SELECT \(unescaped: Self.revocationColumns) FROM apple_revocation WHERE id = \(id)"
        ).first.flatMap(Self.revocation)
    }

    public func appleRevocationCounts() async throws -> AppleRevocationCounts {
        let rows = try await database.rows(
            "counting Apple token revocations failed",
            "\(unescaped: AppleRevocationCounts.sql)"
        )
        return AppleRevocationCounts(
            rows: try rows.map {
                let (outcome, count) = try $0.decode((String?, Int64).self)
                return (outcome, Int(count))
            }
        )
    }

    static let revocationColumns = """
        id, client_id, token_type_hint, key_version, sealed_token, attempts, next_attempt_at, created_at, outcome, \
        error, ended_at
        """

    /// A row as a revocation; nil for one whose key version is outside 32 bits.
    static func revocation(_ row: PostgresRow) throws -> AppleRevocation? {
        let cells = row.makeRandomAccess()
        guard let keyVersion = UInt32(exactly: try cells[3].decode(Int64.self)) else { return nil }
        return AppleRevocation(
            id: try cells[0].decode(String.self),
            clientID: try cells[1].decode(String.self),
            tokenTypeHint: try cells[2].decode(String.self),
            keyVersion: keyVersion,
            sealedToken: [UInt8](try cells[4].decode(Data.self)),
            attempts: Int(clamping: try cells[5].decode(Int64.self)),
            nextAttemptAt: Timestamp.date(unixMilliseconds: try cells[6].decode(Int64.self)),
            createdAt: Timestamp.date(unixMilliseconds: try cells[7].decode(Int64.self)),
            outcome: AppleRevocation.outcome(
                stored: try cells[8].decode(String?.self),
                error: try cells[9].decode(String?.self)
            ),
            endedAt: date(try cells[10].decode(Int64?.self))
        )
    }
}

extension PostgresWriteTransaction: AppleRevocationWriteTransaction {
    func dueAppleRevocations(at now: Date, limit: Int) async throws -> [AppleRevocation] {
        try await connection.query(
            """
            SELECT \(unescaped: PostgresEscrowStore.revocationColumns) FROM apple_revocation
            WHERE ended_at IS NULL AND next_attempt_at <= \(PostgresEscrowStore.ms(now))
            ORDER BY next_attempt_at LIMIT \(Int64(limit)) FOR UPDATE SKIP LOCKED
            """,
            logger: logger
        ).collect().compactMap(PostgresEscrowStore.revocation)
    }

    func setAppleRevocation(id: String, expected: Int, attempts: Int, next: Date) async throws -> Bool {
        let rows = try await connection.query(
            """
            UPDATE apple_revocation
            SET attempts = \(Int64(attempts)), next_attempt_at = \(PostgresEscrowStore.ms(next))
            WHERE id = \(id) AND attempts = \(Int64(expected)) AND ended_at IS NULL RETURNING 1
            """,
            logger: logger
        ).collect()
        return rows.count == 1
    }

    func endAppleRevocation(
        id: String,
        expected: Int,
        outcome: AppleRevocation.Outcome,
        at now: Date
    ) async throws -> Bool {
        let (name, error) = AppleRevocation.stored(outcome)
        let rows = try await connection.query(
            """
            UPDATE apple_revocation
            SET sealed_token = ''::bytea, outcome = \(name), error = \(error), ended_at = \(PostgresEscrowStore.ms(now))
            WHERE id = \(id) AND attempts = \(Int64(expected)) AND ended_at IS NULL RETURNING 1
            """,
            logger: logger
        ).collect()
        return rows.count == 1
    }
}
