public import EscrowCore
public import Foundation
import GRDB

extension SQLiteTokenStore {
    public func addToken(_ record: AccessTokenRecord) async throws {
        try await write { db in
            let active =
                try Int.fetchOne(
                    db,
                    sql: "SELECT COUNT(*) FROM access_token WHERE name = ? AND revoked_at IS NULL",
                    arguments: [record.name]
                ) ?? 0
            guard active == 0 else {
                throw EscrowStoreError(.tokenExists, "an active token with this name already exists; revoke it first")
            }
            try db.execute(sql: "DELETE FROM access_token WHERE name = ?", arguments: [record.name])
            try db.execute(
                sql:
                    "INSERT INTO access_token (name, token_hash, scopes, created_at, revoked_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [
                    record.name, Data(record.hash), Self.scopesText(record.scopes),
                    SQLiteEscrowStore.ms(record.createdAt), SQLiteEscrowStore.ms(record.revokedAt),
                ]
            )
        }
    }

    public func tokens() async throws -> [AccessTokenRecord] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM access_token ORDER BY name").map(Self.token(from:))
        }
    }

    public func revokeToken(name: String, at now: Date) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "UPDATE access_token SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL",
                arguments: [SQLiteEscrowStore.ms(now), name]
            )
            return db.changesCount == 1
        }
    }

    /// Served from ``TokenLookupCache`` while the file has not changed since the token was read.
    public func token(hash: [UInt8]) async throws -> AccessTokenRecord? {
        let version = lookups.currentVersion()
        if let cached = lookups.record(hash: hash, at: version) { return cached }
        let record = try await read { db in
            let statement = try db.cachedStatement(sql: "SELECT * FROM access_token WHERE token_hash = ?")
            return try Row.fetchOne(statement, arguments: [Data(hash)]).map(Self.token(from:))
        }
        if let record { lookups.keep(record, hash: hash, readUnder: version) }
        return record
    }

    static func scopesText(_ scopes: Set<AccessTokenScope>) -> String {
        scopes.sorted().map(\.rawValue).joined(separator: " ")
    }

    static func token(from row: Row) -> AccessTokenRecord {
        let scopes = (row["scopes"] as String).split(separator: " ").compactMap {
            AccessTokenScope(rawValue: String($0))
        }
        return AccessTokenRecord(
            name: row["name"],
            scopes: Set(scopes),
            hash: [UInt8](row["token_hash"] as Data),
            createdAt: Timestamp.date(unixMilliseconds: row["created_at"]),
            revokedAt: SQLiteEscrowStore.date(row["revoked_at"] as Int64?)
        )
    }
}
