import EscrowCore
import EscrowCrypto
import Foundation
import PostgresNIO

/// Apple token exchanges in PostgreSQL: a claim locks the due exchanges it takes (`FOR UPDATE SKIP LOCKED`) and
/// leases them, so exchangers on several nodes never take the same code at once.
extension PostgresWriteTransaction: AppleTokenWriteTransaction {
    func insertAppleExchange(_ exchange: AppleTokenExchange) async throws -> Bool {
        let rows = try await connection.query(
            """
            INSERT INTO apple_token_exchange (code_hash, escrow_id, client_id, redirect_uri, key_version, sealed_code,
                attempts, next_attempt_at, created_at, expires_at)
            VALUES (\(Data(exchange.codeHash)), \(Data(exchange.escrowID.bytes)), \(exchange.clientID),
                \(exchange.redirectURI), \(Int64(exchange.keyVersion)), \(Data(exchange.sealedCode)),
                \(Int64(exchange.attempts)), \(PostgresEscrowStore.ms(exchange.nextAttemptAt)),
                \(PostgresEscrowStore.ms(exchange.createdAt)), \(PostgresEscrowStore.ms(exchange.expiresAt)))
            ON CONFLICT (code_hash) DO NOTHING RETURNING 1
            """,
            logger: logger
        ).collect()
        return rows.count == 1
    }

    func dueAppleExchanges(at now: Date, limit: Int) async throws -> [AppleTokenExchange] {
        try await connection.query(
            """
            SELECT \(unescaped: PostgresEscrowStore.appleExchangeColumns) FROM apple_token_exchange
            WHERE ended_at IS NULL AND next_attempt_at <= \(PostgresEscrowStore.ms(now))
            ORDER BY next_attempt_at LIMIT \(Int64(limit)) FOR UPDATE SKIP LOCKED
            """,
            logger: logger
        ).collect().compactMap(PostgresEscrowStore.appleExchange)
    }

    func setAppleExchange(
        _ key: AppleTokenExchange.Key,
        expected: Int,
        attempts: Int,
        next: Date
    ) async throws -> Bool {
        let rows = try await connection.query(
            """
            UPDATE apple_token_exchange
            SET attempts = \(Int64(attempts)), next_attempt_at = \(PostgresEscrowStore.ms(next))
            WHERE escrow_id = \(Data(key.escrowID.bytes)) AND code_hash = \(Data(key.codeHash))
                AND attempts = \(Int64(expected)) AND ended_at IS NULL RETURNING 1
            """,
            logger: logger
        ).collect()
        return rows.count == 1
    }

    func endAppleExchange(
        _ key: AppleTokenExchange.Key,
        expected: Int,
        outcome: AppleTokenExchange.Outcome,
        at now: Date
    ) async throws -> Bool {
        let (tokens, error) = outcome.stored
        let ms = PostgresEscrowStore.ms(now)
        let ended = try await connection.query(
            """
            UPDATE apple_token_exchange
            SET sealed_code = ''::bytea, sealed_tokens = \(tokens.map { Data($0) }), error = \(error), ended_at = \(ms)
            WHERE escrow_id = \(Data(key.escrowID.bytes)) AND code_hash = \(Data(key.codeHash))
                AND attempts = \(Int64(expected)) AND ended_at IS NULL
            RETURNING 1
            """,
            logger: logger
        ).collect()
        guard ended.count == 1 else { return false }
        // The escrow's first delivery was held for the exchange: due now.
        _ = try await connection.query(
            """
            UPDATE escrow SET next_attempt_at = \(ms), due_at = \(ms), revision = revision + 1, updated_at = \(ms)
            WHERE id = \(Data(key.escrowID.bytes)) AND state = 'pending' AND attempts = 0 AND due_at > \(ms)
            """,
            logger: logger
        ).collect()
        return true
    }
}

extension PostgresEscrowStore {
    static let appleExchangeColumns = """
        code_hash, escrow_id, client_id, redirect_uri, key_version, sealed_code, attempts, next_attempt_at, \
        created_at, expires_at, sealed_tokens, error, ended_at
        """

    /// A row as an exchange; nil for a row that breaks the schema's rules (an escrow id of the wrong length, a key
    /// version outside 32 bits), which no exchanger can use.
    static func appleExchange(_ row: PostgresRow) throws -> AppleTokenExchange? {
        let cells = row.makeRandomAccess()
        let escrowID = try cells[1].decode(Data.self)
        let keyVersion = try cells[4].decode(Int64.self)
        let tokens = try cells[10].decode(Data?.self)
        let error = try cells[11].decode(String?.self)
        guard let id = EscrowID(bytes: [UInt8](escrowID)), let version = UInt32(exactly: keyVersion) else { return nil }
        let outcome: AppleTokenExchange.Outcome? =
            if let tokens { .tokens(sealed: [UInt8](tokens)) } else if let error { .refused(error) } else { nil }
        return AppleTokenExchange(
            codeHash: [UInt8](try cells[0].decode(Data.self)),
            escrowID: id,
            clientID: try cells[2].decode(String.self),
            redirectURI: try cells[3].decode(String?.self),
            keyVersion: version,
            sealedCode: [UInt8](try cells[5].decode(Data.self)),
            attempts: Int(clamping: try cells[6].decode(Int64.self)),
            nextAttemptAt: Timestamp.date(unixMilliseconds: try cells[7].decode(Int64.self)),
            createdAt: Timestamp.date(unixMilliseconds: try cells[8].decode(Int64.self)),
            expiresAt: Timestamp.date(unixMilliseconds: try cells[9].decode(Int64.self)),
            outcome: outcome,
            endedAt: date(try cells[12].decode(Int64?.self))
        )
    }
}
