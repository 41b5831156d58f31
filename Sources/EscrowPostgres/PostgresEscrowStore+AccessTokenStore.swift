public import EscrowCore
public import Foundation
import PostgresNIO

/// The HTTP API's bearer tokens (hashes only) in the shared database. Nothing is cached: every lookup asks the
/// server, so a token added or revoked on any node is seen by every node's next request.
extension PostgresEscrowStore: AccessTokenStore {
    public func addToken(_ record: AccessTokenRecord) async throws {
        let logger = database.logger
        let scopes = Self.scopesText(record.scopes)
        try await database.transaction("adding a token failed") { connection in
            // A revoked token of the same name is replaced; an active one stays, and the insert does nothing.
            try await connection.query(
                "DELETE FROM access_token WHERE name = \(record.name) AND revoked_at IS NOT NULL",
                logger: logger
            )
            let inserted = try await connection.query(
                """
                INSERT INTO access_token (name, token_hash, scopes, created_at, revoked_at)
                VALUES (\(record.name), \(Data(record.hash)), \(scopes), \(Self.ms(record.createdAt)),
                    \(Self.ms(record.revokedAt)))
                ON CONFLICT (name) DO NOTHING RETURNING 1
                """,
                logger: logger
            ).collect()
            guard inserted.count == 1 else {
                throw EscrowStoreError(.tokenExists, "an active token with this name already exists; revoke it first")
            }
        }
    }

    public func tokens() async throws -> [AccessTokenRecord] {
        // Byte order, as SQLite sorts: the same list whatever the database's collation.
        let rows = try await database.rows(
            "token store read failed",
            "SELECT name, token_hash, scopes, created_at, revoked_at FROM access_token ORDER BY name COLLATE \"C\""
        )
        return try rows.map(token(from:))
    }

    public func revokeToken(name: String, at now: Date) async throws -> Bool {
        try requireWritable()
        let rows = try await database.rows(
            "revoking a token failed",
            """
            UPDATE access_token SET revoked_at = \(Self.ms(now)) WHERE name = \(name) AND revoked_at IS NULL
            RETURNING 1
            """
        )
        return rows.count == 1
    }

    public func token(hash: [UInt8]) async throws -> AccessTokenRecord? {
        let rows = try await database.rows(
            "token store read failed",
            "SELECT name, token_hash, scopes, created_at, revoked_at FROM access_token WHERE token_hash = \(Data(hash))"
        )
        return try rows.first.map(token(from:))
    }

    static func scopesText(_ scopes: Set<AccessTokenScope>) -> String {
        scopes.sorted().map(\.rawValue).joined(separator: " ")
    }

    private func token(from row: PostgresRow) throws -> AccessTokenRecord {
        let (name, hash, scopes, createdAt, revokedAt) = try decode(row, (String, Data, String, Int64, Int64?).self)
        return AccessTokenRecord(
            name: name,
            scopes: Set(scopes.split(separator: " ").compactMap { AccessTokenScope(rawValue: String($0)) }),
            hash: [UInt8](hash),
            createdAt: Timestamp.date(unixMilliseconds: createdAt),
            revokedAt: Self.date(revokedAt)
        )
    }
}
