import EscrowCore
import EscrowCrypto
import Foundation
import GRDB

/// Web sign-in attempts in SQLite: `BEGIN IMMEDIATE` already serializes every writer, so reads need no lock.
extension SQLiteWriteTransaction: SignInWriteTransaction {
    static let signInColumns =
        """
        state_hash, nonce_hash, binding_hash, return_name, created_at, expires_at, used_at, app_state, started_by_app
        """

    func insertSignInAttempt(_ attempt: SignInAttempt) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO signin_attempt (\(Self.signInColumns), purge_at) VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)
                """
        ).execute(
            arguments: [
                Data(attempt.stateHash), Data(attempt.nonceHash), Data(attempt.bindingHash), attempt.returnName,
                Timestamp.unixMilliseconds(attempt.createdAt), Timestamp.unixMilliseconds(attempt.expiresAt),
                attempt.sealedAppState.map { Data($0) }, attempt.startedByApp,
                Timestamp.unixMilliseconds(attempt.expiresAt),
            ]
        )
    }

    func signInAttempt(stateHash: [UInt8]) throws -> SignInAttempt? {
        try Self.signInAttempt(db, stateHash: stateHash)
    }

    static func signInAttempt(_ db: Database, stateHash: [UInt8]) throws -> SignInAttempt? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT \(signInColumns) FROM signin_attempt WHERE state_hash = ?"),
            arguments: [Data(stateHash)]
        ).map { row in
            SignInAttempt(
                stateHash: [UInt8](row["state_hash"] as Data),
                nonceHash: [UInt8](row["nonce_hash"] as Data),
                bindingHash: [UInt8](row["binding_hash"] as Data),
                returnName: row["return_name"],
                createdAt: Timestamp.date(unixMilliseconds: row["created_at"]),
                expiresAt: Timestamp.date(unixMilliseconds: row["expires_at"]),
                usedAt: (row["used_at"] as Int64?).map { Timestamp.date(unixMilliseconds: $0) },
                sealedAppState: (row["app_state"] as Data?).map { [UInt8]($0) },
                startedByApp: row["started_by_app"]
            )
        }
    }

    func useSignInAttempt(_ attempt: SignInAttempt, at now: Date, ticket: SignInTicket) throws -> Bool {
        var arguments: StatementArguments = [
            Timestamp.unixMilliseconds(now), Data(ticket.ticketHash), Timestamp.unixMilliseconds(ticket.expiresAt),
            Data(ticket.sealedResult),
        ]
        // The row is kept until the later of the attempt's and the ticket's expiry. Usually the attempt's, which
        // `purge_at` already holds: the statement then leaves the column, and so its index, alone.
        let extendsPurge = ticket.expiresAt > attempt.expiresAt
        if extendsPurge { arguments += [Timestamp.unixMilliseconds(ticket.expiresAt)] }
        // The attempt as given, which its caller may have read before this transaction: only if it is stored so.
        arguments += [
            Data(attempt.stateHash), Data(attempt.bindingHash), attempt.startedByApp,
            Timestamp.unixMilliseconds(attempt.expiresAt),
        ]
        try db.cachedStatement(
            sql: """
                UPDATE signin_attempt SET used_at = ?, ticket_check = ?, ticket_expires_at = ?, ticket_result = ?\(
                    extendsPurge ? ", purge_at = ?" : "")
                WHERE state_hash = ? AND used_at IS NULL AND binding_hash = ? AND started_by_app = ? AND expires_at = ?
                """
        ).execute(arguments: arguments)
        return db.changesCount == 1
    }

    func reissueSignInTicket(_ attempt: SignInAttempt, ticket: SignInTicket) throws {
        try db.cachedStatement(
            sql: """
                UPDATE signin_attempt SET ticket_check = ?1, ticket_expires_at = ?2, ticket_result = ?3,
                    purge_at = MAX(purge_at, ?2)
                WHERE state_hash = ?4
                """
        ).execute(
            arguments: [
                Data(ticket.ticketHash), Timestamp.unixMilliseconds(ticket.expiresAt), Data(ticket.sealedResult),
                Data(attempt.stateHash),
            ]
        )
    }

    func redeemSignInTicket(_ key: SignInTicketKey, starterHash: [UInt8]?, at now: Date) throws -> SignInRedemption? {
        guard
            let row = try Self.unredeemedTicket(
                db,
                key,
                columns: "state_hash, ticket_result, return_name, binding_hash, started_by_app",
                at: now
            )
        else { return nil }
        if row["started_by_app"] {
            guard let starterHash, Hashing.constantTimeEqual([UInt8](row["binding_hash"] as Data), starterHash)
            else { return nil }
        }
        try db.cachedStatement(
            sql: "UPDATE signin_attempt SET redeemed_at = ?, ticket_result = NULL WHERE state_hash = ?"
        ).execute(arguments: [Timestamp.unixMilliseconds(now), row["state_hash"] as Data])
        return SignInRedemption(sealedResult: [UInt8](row["ticket_result"] as Data), returnName: row["return_name"])
    }

    static func unredeemedSignInTicket(_ db: Database, _ key: SignInTicketKey, at now: Date) throws -> [UInt8]? {
        try unredeemedTicket(db, key, columns: "ticket_result", at: now).map { [UInt8]($0["ticket_result"] as Data) }
    }

    /// The row of an unredeemed ticket not past its expiry: found by the state hash (the table's key) with the
    /// ticket's hash checked in the row, or for a ticket stored before tickets named their attempt, by its hash in
    /// `ticket_hash`'s index.
    private static func unredeemedTicket(
        _ db: Database,
        _ key: SignInTicketKey,
        columns: String,
        at now: Date
    ) throws -> Row? {
        let (match, arguments): (String, StatementArguments) =
            if let stateHash = key.stateHash {
                ("state_hash = ? AND ticket_check = ?", [Data(stateHash), Data(key.ticketHash)])
            } else {
                ("ticket_hash = ?", [Data(key.ticketHash)])
            }
        return try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT \(columns) FROM signin_attempt
                    WHERE \(match) AND redeemed_at IS NULL AND ticket_result IS NOT NULL AND ticket_expires_at > ?
                    """
            ),
            arguments: arguments + [Timestamp.unixMilliseconds(now)]
        )
    }

    func deleteSignInAttempts(expiredAt now: Date) throws -> Int {
        try db.execute(
            sql: "DELETE FROM signin_attempt WHERE purge_at <= ?",
            arguments: [Timestamp.unixMilliseconds(now)]
        )
        return db.changesCount
    }
}
