import EscrowCore
import EscrowCrypto
import Foundation
import GRDB

/// Apple token exchanges in SQLite: `BEGIN IMMEDIATE` serializes every writer, so a claim needs no row lock.
extension SQLiteWriteTransaction: AppleTokenWriteTransaction {
    func insertAppleExchange(_ exchange: AppleTokenExchange) throws -> Bool {
        try db.cachedStatement(
            sql: """
                INSERT INTO apple_token_exchange (code_hash, escrow_id, client_id, redirect_uri, key_version,
                    sealed_code, attempts, next_attempt_at, created_at, expires_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (escrow_id, code_hash) DO NOTHING
                """
        ).execute(
            arguments: [
                Data(exchange.codeHash), Data(exchange.escrowID.bytes), exchange.clientID, exchange.redirectURI,
                Int64(exchange.keyVersion), Data(exchange.sealedCode), exchange.attempts,
                Timestamp.unixMilliseconds(exchange.nextAttemptAt), Timestamp.unixMilliseconds(exchange.createdAt),
                Timestamp.unixMilliseconds(exchange.expiresAt),
            ]
        )
        return db.changesCount == 1
    }

    func dueAppleExchanges(at now: Date, limit: Int) throws -> [AppleTokenExchange] {
        try Row.fetchAll(
            db.cachedStatement(
                sql: "SELECT \(Self.appleExchangeColumns) FROM apple_token_exchange "
                    + "WHERE ended_at IS NULL AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?"
            ),
            arguments: [Timestamp.unixMilliseconds(now), limit]
        ).compactMap(Self.appleExchange)
    }

    func setAppleExchange(_ key: AppleTokenExchange.Key, expected: Int, attempts: Int, next: Date) throws -> Bool {
        try db.cachedStatement(
            sql: """
                UPDATE apple_token_exchange SET attempts = ?, next_attempt_at = ?
                WHERE escrow_id = ? AND code_hash = ? AND attempts = ? AND ended_at IS NULL
                """
        ).execute(
            arguments: [
                attempts, Timestamp.unixMilliseconds(next), Data(key.escrowID.bytes), Data(key.codeHash), expected,
            ]
        )
        return db.changesCount == 1
    }

    func endAppleExchange(
        _ key: AppleTokenExchange.Key,
        expected: Int,
        outcome: AppleTokenExchange.Outcome,
        at now: Date
    ) throws -> Bool {
        let (tokens, error) = outcome.stored
        let ms = Timestamp.unixMilliseconds(now)
        try db.cachedStatement(
            sql: """
                UPDATE apple_token_exchange SET sealed_code = X'', sealed_tokens = ?, error = ?, ended_at = ?
                WHERE escrow_id = ? AND code_hash = ? AND attempts = ? AND ended_at IS NULL
                """
        ).execute(
            arguments: [tokens.map { Data($0) }, error, ms, Data(key.escrowID.bytes), Data(key.codeHash), expected]
        )
        guard db.changesCount == 1 else { return false }
        // The escrow's first delivery was held for the exchange: due now.
        try db.cachedStatement(
            sql: """
                UPDATE escrow SET next_attempt_at = ?1, due_at = ?1, revision = revision + 1, updated_at = ?1
                WHERE id = ?2 AND state = 'pending' AND attempts = 0 AND due_at > ?1
                """
        ).execute(
            arguments: [ms, Data(key.escrowID.bytes)]
        )
        return true
    }

    static let appleExchangeColumns = """
        code_hash, escrow_id, client_id, redirect_uri, key_version, sealed_code, attempts, next_attempt_at, \
        created_at, expires_at, sealed_tokens, error, ended_at
        """

    /// A row as an exchange; nil for a row that breaks the schema's rules (an escrow id of the wrong length, a key
    /// version outside 32 bits), which no exchanger can use.
    static func appleExchange(_ row: Row) -> AppleTokenExchange? {
        guard let escrowID = EscrowID(bytes: [UInt8](row["escrow_id"] as Data)),
            let keyVersion = UInt32(exactly: row["key_version"] as Int64)
        else { return nil }
        let endedAt = (row["ended_at"] as Int64?).map(Timestamp.date(unixMilliseconds:))
        let outcome: AppleTokenExchange.Outcome? =
            if let tokens = row["sealed_tokens"] as Data? {
                .tokens(sealed: [UInt8](tokens))
            } else if let error = row["error"] as String? {
                .refused(error)
            } else {
                nil
            }
        return AppleTokenExchange(
            codeHash: [UInt8](row["code_hash"] as Data),
            escrowID: escrowID,
            clientID: row["client_id"],
            redirectURI: row["redirect_uri"],
            keyVersion: keyVersion,
            sealedCode: [UInt8](row["sealed_code"] as Data),
            attempts: Int(clamping: row["attempts"] as Int64),
            nextAttemptAt: Timestamp.date(unixMilliseconds: row["next_attempt_at"]),
            createdAt: Timestamp.date(unixMilliseconds: row["created_at"]),
            expiresAt: Timestamp.date(unixMilliseconds: row["expires_at"]),
            outcome: outcome,
            endedAt: endedAt
        )
    }
}
