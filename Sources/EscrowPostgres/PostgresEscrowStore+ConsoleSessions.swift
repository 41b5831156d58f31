public import EscrowCore
public import Foundation
import PostgresNIO

/// The console's sessions in the shared database: every node serves every session, and a restart signs nobody out.
extension PostgresEscrowStore {
    public func createConsoleSession(_ session: ConsoleSessionRecord) async throws {
        try requireWritable()
        let logger = database.logger
        let token = Data(session.tokenHash)
        try await database.transaction("recording a console session failed") { connection in
            try await connection.query(
                """
                INSERT INTO console_session (id_hash, token_hash, created_at, last_seen_at, expires_at)
                VALUES (\(Data(session.idHash)), \(token), \(Self.ms(session.createdAt)),
                    \(Self.ms(session.lastSeenAt)), \(Self.ms(session.expiresAt)))
                """,
                logger: logger
            )
            // The token's oldest sessions beyond the bound end, with their held pages.
            try await connection.query(
                """
                WITH ended AS (
                    DELETE FROM console_session WHERE id_hash IN (
                        SELECT id_hash FROM console_session WHERE token_hash = \(token)
                        ORDER BY created_at DESC, id_hash OFFSET \(ConsoleSessionLimits.perToken)
                    ) RETURNING id_hash
                )
                DELETE FROM console_held_page WHERE session_hash IN (SELECT id_hash FROM ended)
                """,
                logger: logger
            )
        }
    }

    public func consoleSession(idHash: [UInt8], now: Date, idle: TimeInterval) async throws -> ConsoleSessionRecord? {
        let rows = try await database.rows(
            "console session read failed",
            """
            SELECT token_hash, created_at, last_seen_at, expires_at FROM console_session
            WHERE id_hash = \(Data(idHash))
            """
        )
        guard let row = rows.first else { return nil }
        let (tokenHash, createdAt, lastSeenAt, expiresAt) = try decode(row, (Data, Int64, Int64, Int64).self)
        let session = ConsoleSessionRecord(
            idHash: idHash,
            tokenHash: [UInt8](tokenHash),
            createdAt: Timestamp.date(unixMilliseconds: createdAt),
            lastSeenAt: Timestamp.date(unixMilliseconds: lastSeenAt),
            expiresAt: Timestamp.date(unixMilliseconds: expiresAt)
        )
        return session.isLive(at: now, idle: idle) ? session : nil
    }

    public func touchConsoleSession(idHash: [UInt8], at now: Date) async throws {
        try requireWritable()
        _ = try await database.rows(
            "recording a console request failed",
            """
            UPDATE console_session SET last_seen_at = GREATEST(last_seen_at, \(Self.ms(now)))
            WHERE id_hash = \(Data(idHash))
            """
        )
    }

    public func endConsoleSession(idHash: [UInt8]) async throws {
        try requireWritable()
        let logger = database.logger
        let id = Data(idHash)
        try await database.transaction("ending a console session failed") { connection in
            try await connection.query("DELETE FROM console_held_page WHERE session_hash = \(id)", logger: logger)
            try await connection.query("DELETE FROM console_session WHERE id_hash = \(id)", logger: logger)
        }
    }

    public func holdConsolePage(
        _ page: HeldConsolePage,
        resultHash: [UInt8],
        sessionHash: [UInt8],
        expiresAt: Date
    ) async throws {
        try requireWritable()
        let logger = database.logger
        let session = Data(sessionHash)
        try await database.transaction("holding a console page failed") { connection in
            try await connection.query(
                """
                INSERT INTO console_held_page (result_hash, session_hash, status, sealed, expires_at)
                VALUES (\(Data(resultHash)), \(session), \(page.status), \(Data(page.sealed)), \(Self.ms(expiresAt)))
                """,
                logger: logger
            )
            try await connection.query(
                """
                DELETE FROM console_held_page WHERE result_hash IN (
                    SELECT result_hash FROM console_held_page WHERE session_hash = \(session)
                    ORDER BY expires_at DESC, result_hash OFFSET \(ConsoleSessionLimits.heldPerSession)
                )
                """,
                logger: logger
            )
        }
    }

    public func takeConsolePage(
        resultHash: [UInt8],
        sessionHash: [UInt8],
        now: Date
    ) async throws -> HeldConsolePage? {
        try requireWritable()
        // Removed as it is read, by the one statement: two GETs at once find it once.
        let rows = try await database.rows(
            "reading a held console page failed",
            """
            DELETE FROM console_held_page
            WHERE result_hash = \(Data(resultHash)) AND session_hash = \(Data(sessionHash))
            RETURNING status, sealed, expires_at
            """
        )
        guard let row = rows.first else { return nil }
        let (status, sealed, expiresAt) = try decode(row, (Int32, Data, Int64).self)
        guard expiresAt > Self.ms(now) else { return nil }
        return HeldConsolePage(status: Int(status), sealed: [UInt8](sealed))
    }

    @discardableResult
    public func sweepConsoleSessions(now: Date, idle: TimeInterval) async throws -> Int {
        try requireWritable()
        let logger = database.logger
        let nowMilliseconds = Self.ms(now)
        let seenBefore = Self.ms(now.addingTimeInterval(-idle))
        return try await database.transaction("sweeping console sessions failed") { connection in
            try await connection.query(
                "DELETE FROM console_held_page WHERE expires_at <= \(nowMilliseconds)",
                logger: logger
            )
            let ended = try await connection.query(
                """
                WITH ended AS (
                    DELETE FROM console_session WHERE expires_at <= \(nowMilliseconds) OR last_seen_at <= \(seenBefore)
                    RETURNING id_hash
                ), dropped AS (
                    DELETE FROM console_held_page WHERE session_hash IN (SELECT id_hash FROM ended)
                )
                SELECT count(*) FROM ended
                """,
                logger: logger
            ).collect()
            return Int(try ended.first?.decode(Int64.self) ?? 0)
        }
    }
}
