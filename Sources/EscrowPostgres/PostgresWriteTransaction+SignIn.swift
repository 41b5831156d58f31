import EscrowCore
import EscrowCrypto
import Foundation
import PostgresNIO

/// Web sign-in attempts in PostgreSQL: a callback locks its attempt's row (`FOR UPDATE`), so two nodes receiving the
/// same callback complete it once.
extension PostgresWriteTransaction: SignInWriteTransaction {
    func insertSignInAttempt(_ attempt: SignInAttempt) async throws {
        let expires = PostgresEscrowStore.ms(attempt.expiresAt)
        try await connection.query(
            """
            INSERT INTO signin_attempt (state_hash, nonce_hash, binding_hash, return_name, created_at, expires_at,
                purge_at, app_state, started_by_app)
            VALUES (\(Data(attempt.stateHash)), \(Data(attempt.nonceHash)), \(Data(attempt.bindingHash)),
                \(attempt.returnName), \(PostgresEscrowStore.ms(attempt.createdAt)), \(expires), \(expires),
                \(attempt.sealedAppState.map { Data($0) }), \(attempt.startedByApp))
            """,
            logger: logger
        )
    }

    func signInAttempt(stateHash: [UInt8]) async throws -> SignInAttempt? {
        try await PostgresEscrowStore.signInAttempt(connection, stateHash: stateHash, forUpdate: true, logger: logger)
    }

    func useSignInAttempt(_ attempt: SignInAttempt, at now: Date, ticket: SignInTicket) async throws -> Bool {
        let ticketExpires = PostgresEscrowStore.ms(ticket.expiresAt)
        let rows = try await connection.query(
            """
            UPDATE signin_attempt SET used_at = \(PostgresEscrowStore.ms(now)), ticket_check = \(Data(ticket.ticketHash)),
                ticket_expires_at = \(ticketExpires), ticket_result = \(Data(ticket.sealedResult)),
                purge_at = GREATEST(expires_at, \(ticketExpires))
            WHERE state_hash = \(Data(attempt.stateHash)) AND used_at IS NULL
                AND binding_hash = \(Data(attempt.bindingHash)) AND started_by_app = \(attempt.startedByApp)
                AND expires_at = \(PostgresEscrowStore.ms(attempt.expiresAt))
            RETURNING 1
            """,
            logger: logger
        ).collect()
        return rows.count == 1
    }

    func reissueSignInTicket(_ attempt: SignInAttempt, ticket: SignInTicket) async throws {
        try await connection.query(
            """
            UPDATE signin_attempt SET ticket_check = \(Data(ticket.ticketHash)),
                ticket_expires_at = \(PostgresEscrowStore.ms(ticket.expiresAt)),
                ticket_result = \(Data(ticket.sealedResult)),
                purge_at = GREATEST(purge_at, \(PostgresEscrowStore.ms(ticket.expiresAt)))
            WHERE state_hash = \(Data(attempt.stateHash))
            """,
            logger: logger
        )
    }

    func redeemSignInTicket(
        _ key: SignInTicketKey,
        starterHash: [UInt8]?,
        at now: Date
    ) async throws
        -> SignInRedemption?
    {
        let select = try PostgresEscrowStore.unredeemedTicket(
            key,
            columns: "state_hash, ticket_result, return_name, binding_hash, started_by_app",
            at: now,
            forUpdate: true
        )
        let rows = try await connection.query(select, logger: logger).collect()
            .map { try $0.decode((Data, Data, String, Data, Bool).self) }
        guard let (stateHash, result, returnName, bindingHash, startedByApp) = rows.first else { return nil }
        if startedByApp {
            guard let starterHash, Hashing.constantTimeEqual([UInt8](bindingHash), starterHash) else { return nil }
        }
        try await connection.query(
            """
            UPDATE signin_attempt SET redeemed_at = \(PostgresEscrowStore.ms(now)), ticket_result = NULL
            WHERE state_hash = \(stateHash)
            """,
            logger: logger
        )
        return SignInRedemption(sealedResult: [UInt8](result), returnName: returnName)
    }

    func deleteSignInAttempts(expiredAt now: Date) async throws -> Int {
        let rows = try await connection.query(
            """
            WITH deleted AS (DELETE FROM signin_attempt WHERE purge_at <= \(PostgresEscrowStore.ms(now)) RETURNING 1)
            SELECT COUNT(*) FROM deleted
            """,
            logger: logger
        ).collect().map { try $0.decode(Int64.self) }
        return Int(rows.first ?? 0)
    }
}
