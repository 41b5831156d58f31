public import EscrowCore
public import Foundation
import GRDB

/// The console's sessions in the escrow database, so every process on the file shares them. A read is one primary-key
/// lookup on the reader; the writes (a sign-in, a touch a minute, a held page) are short transactions.
extension SQLiteEscrowStore {
    public func createConsoleSession(_ session: ConsoleSessionRecord) async throws {
        try await write { transaction in
            let db = transaction.db
            try db.execute(
                sql: """
                    INSERT INTO console_session (id_hash, token_hash, created_at, last_seen_at, expires_at)
                    VALUES (?, ?, ?, ?, ?)
                    """,
                arguments: [
                    Data(session.idHash), Data(session.tokenHash), Timestamp.unixMilliseconds(session.createdAt),
                    Timestamp.unixMilliseconds(session.lastSeenAt), Timestamp.unixMilliseconds(session.expiresAt),
                ]
            )
            let ended = try Data.fetchAll(
                db,
                sql: """
                    SELECT id_hash FROM console_session WHERE token_hash = ?
                    ORDER BY created_at DESC, id_hash LIMIT -1 OFFSET ?
                    """,
                arguments: [Data(session.tokenHash), ConsoleSessionLimits.perToken]
            )
            for idHash in ended { try Self.deleteSession(db, idHash: idHash) }
        }
    }

    public func consoleSession(idHash: [UInt8], now: Date, idle: TimeInterval) async throws -> ConsoleSessionRecord? {
        try await read { db in
            guard
                let row = try Row.fetchOne(
                    db.cachedStatement(
                        sql: """
                            SELECT token_hash, created_at, last_seen_at, expires_at FROM console_session
                            WHERE id_hash = ?
                            """
                    ),
                    arguments: [Data(idHash)]
                )
            else { return nil }
            let session = ConsoleSessionRecord(
                idHash: idHash,
                tokenHash: [UInt8](row["token_hash"] as Data),
                createdAt: Timestamp.date(unixMilliseconds: row["created_at"]),
                lastSeenAt: Timestamp.date(unixMilliseconds: row["last_seen_at"]),
                expiresAt: Timestamp.date(unixMilliseconds: row["expires_at"])
            )
            return session.isLive(at: now, idle: idle) ? session : nil
        }
    }

    public func touchConsoleSession(idHash: [UInt8], at now: Date) async throws {
        try await write(durable: false) { transaction in
            try transaction.db.execute(
                sql: "UPDATE console_session SET last_seen_at = MAX(last_seen_at, ?) WHERE id_hash = ?",
                arguments: [Timestamp.unixMilliseconds(now), Data(idHash)]
            )
        }
    }

    public func endConsoleSession(idHash: [UInt8]) async throws {
        try await write { transaction in try Self.deleteSession(transaction.db, idHash: Data(idHash)) }
    }

    public func holdConsolePage(
        _ page: HeldConsolePage,
        resultHash: [UInt8],
        sessionHash: [UInt8],
        expiresAt: Date
    ) async throws {
        try await write { transaction in
            let db = transaction.db
            try db.execute(
                sql: """
                    INSERT INTO console_held_page (result_hash, session_hash, status, sealed, expires_at)
                    VALUES (?, ?, ?, ?, ?)
                    """,
                arguments: [
                    Data(resultHash), Data(sessionHash), page.status, Data(page.sealed),
                    Timestamp.unixMilliseconds(expiresAt),
                ]
            )
            try db.execute(
                sql: """
                    DELETE FROM console_held_page WHERE result_hash IN (
                        SELECT result_hash FROM console_held_page WHERE session_hash = ?
                        ORDER BY expires_at DESC, result_hash LIMIT -1 OFFSET ?
                    )
                    """,
                arguments: [Data(sessionHash), ConsoleSessionLimits.heldPerSession]
            )
        }
    }

    public func takeConsolePage(
        resultHash: [UInt8],
        sessionHash: [UInt8],
        now: Date
    ) async throws -> HeldConsolePage? {
        try await write { transaction in
            // Removed as it is read, by the one statement: two GETs at once find it once.
            let row = try Row.fetchOne(
                transaction.db,
                sql: """
                    DELETE FROM console_held_page WHERE result_hash = ? AND session_hash = ?
                    RETURNING status, sealed, expires_at
                    """,
                arguments: [Data(resultHash), Data(sessionHash)]
            )
            guard let row, (row["expires_at"] as Int64) > Timestamp.unixMilliseconds(now) else { return nil }
            return HeldConsolePage(status: row["status"], sealed: [UInt8](row["sealed"] as Data))
        }
    }

    @discardableResult
    public func sweepConsoleSessions(now: Date, idle: TimeInterval) async throws -> Int {
        let nowMilliseconds = Timestamp.unixMilliseconds(now)
        let seenBefore = Timestamp.unixMilliseconds(now.addingTimeInterval(-idle))
        return try await write { transaction in
            let db = transaction.db
            try db.execute(
                sql: """
                    DELETE FROM console_held_page WHERE expires_at <= ? OR session_hash IN (
                        SELECT id_hash FROM console_session WHERE expires_at <= ? OR last_seen_at <= ?
                    )
                    """,
                arguments: [nowMilliseconds, nowMilliseconds, seenBefore]
            )
            try db.execute(
                sql: "DELETE FROM console_session WHERE expires_at <= ? OR last_seen_at <= ?",
                arguments: [nowMilliseconds, seenBefore]
            )
            return db.changesCount
        }
    }

    private static func deleteSession(_ db: Database, idHash: Data) throws {
        try db.execute(sql: "DELETE FROM console_held_page WHERE session_hash = ?", arguments: [idHash])
        try db.execute(sql: "DELETE FROM console_session WHERE id_hash = ?", arguments: [idHash])
    }
}
