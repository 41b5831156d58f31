public import EscrowCore
public import Foundation
import Logging
import PostgresNIO

extension PostgresEscrowStore: SignInStore {
    public func createSignInAttempt(_ attempt: SignInAttempt) async throws {
        try requireWritable()
        try await Self.engineTransaction(database, "creating a sign-in attempt failed") {
            try await $0.insertSignInAttempt(attempt)
        }
    }

    public func signInAttempt(stateHash: [UInt8]) async throws -> SignInAttempt? {
        let logger = database.logger
        return try await database.withConnection("read failed") { connection in
            try await Self.signInAttempt(connection, stateHash: stateHash, forUpdate: false, logger: logger)
        }
    }

    /// Through a group commit of its own (``SignInBatcher``), as captures: concurrent callbacks of this node share
    /// one transaction and one WAL flush, each attempt's use and capture still committed together, and each answered
    /// only once its COMMIT returned. A batch locks its attempts' rows (`FOR UPDATE`) in the order of their state
    /// hash, so two nodes' batches lock them in the same order; of two callbacks of one state in one batch, the first
    /// written completes and the other finds the attempt used, as in two transactions.
    public func completeSignIn(
        _ request: SignInCompletionRequest,
        capture record: EscrowRecord?,
        actor: AuditActor,
        lifecycle: EscrowLifecycle
    ) async throws -> SignInCompletion {
        try requireWritable()
        let item = record.map { CaptureItem(record: $0, actor: actor, lifecycle: lifecycle) }
        return try await signIns.submit(
            SignInCompletionItem(request: request, capture: item),
            deadline: StoreDatabase.callerDeadline
        )
    }

    public func redeemSignInTicket(
        _ key: SignInTicketKey,
        starterHash: [UInt8]?,
        at now: Date
    ) async throws -> SignInRedemption? {
        try requireWritable()
        return try await Self.engineTransaction(database, "redeeming a sign-in ticket failed") {
            try await $0.redeemSignInTicket(key, starterHash: starterHash, at: now)
        }
    }

    public func unredeemedSignInTicket(_ key: SignInTicketKey, at now: Date) async throws -> [UInt8]? {
        let logger = database.logger
        let query = try Self.unredeemedTicket(key, columns: "ticket_result", at: now)
        return try await database.withConnection("read failed") { connection in
            try await connection.query(query, logger: logger).collect().first.map { [UInt8](try $0.decode(Data.self)) }
        }
    }

    /// The `SELECT` of an unredeemed ticket's `columns` while it is not past its expiry at `now`: found by the state
    /// hash (the table's key) with the ticket's hash checked in the row, or for a ticket stored before tickets named
    /// their attempt, by its hash in `ticket_hash`'s index. Only the SQL's shape depends on which; values are binds.
    static func unredeemedTicket(
        _ key: SignInTicketKey,
        columns: String,
        at now: Date,
        forUpdate: Bool = false
    ) throws -> PostgresQuery {
        var binds = PostgresBindings(capacity: 3)
        let match: String
        if let stateHash = key.stateHash {
            try binds.append(Data(stateHash))
            try binds.append(Data(key.ticketHash))
            match = "state_hash = $1 AND ticket_check = $2"
        } else {
            try binds.append(Data(key.ticketHash))
            match = "ticket_hash = $1"
        }
        binds.append(ms(now))
        return PostgresQuery(
            unsafeSQL: """
                SELECT \(columns) FROM signin_attempt
                WHERE \(match) AND redeemed_at IS NULL AND ticket_result IS NOT NULL AND ticket_expires_at > $\(binds.count)
                \(forUpdate ? "FOR UPDATE" : "")
                """,
            binds: binds
        )
    }

    public func sweepSignInAttempts(at now: Date) async throws -> Int {
        try requireWritable()
        return try await Self.engineTransaction(database, "sweeping sign-in attempts failed") {
            try await $0.deleteSignInAttempts(expiredAt: now)
        }
    }

    static func signInAttempt(
        _ connection: PostgresConnection,
        stateHash: [UInt8],
        forUpdate: Bool,
        logger: Logger
    ) async throws -> SignInAttempt? {
        let lock = forUpdate ? " FOR UPDATE" : ""
        let rows = try await connection.query(
            """
            SELECT state_hash, nonce_hash, binding_hash, return_name, created_at, expires_at, used_at, app_state,
                started_by_app
            FROM signin_attempt WHERE state_hash = \(Data(stateHash))\(unescaped: lock)
            """,
            logger: logger
        ).collect().map { try $0.decode((Data, Data, Data, String, Int64, Int64, Int64?, Data?, Bool).self) }
        return rows.first.map { row in
            SignInAttempt(
                stateHash: [UInt8](row.0),
                nonceHash: [UInt8](row.1),
                bindingHash: [UInt8](row.2),
                returnName: row.3,
                createdAt: Timestamp.date(unixMilliseconds: row.4),
                expiresAt: Timestamp.date(unixMilliseconds: row.5),
                usedAt: date(row.6),
                sealedAppState: row.7.map { [UInt8]($0) },
                startedByApp: row.8
            )
        }
    }
}
