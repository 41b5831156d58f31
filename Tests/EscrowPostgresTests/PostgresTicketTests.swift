import EscrowCore
import EscrowCrypto
import EscrowPostgres
import Foundation
import PostgresNIO
import Testing

/// Tickets in PostgreSQL since migration 13: kept in their attempt's row (`ticket_check`, no index), found by its key;
/// a ticket an earlier version stored by its hash alone still redeems.
@Suite("PostgreSQL: sign-in tickets found by their attempt")
struct PostgresTicketTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    static func hash(_ text: String) -> [UInt8] { Hashing.blake2b256(Array(text.utf8)) }

    @Test("a ticket stored by its hash alone (before migration 13) redeems once; a new one leaves ticket_hash empty")
    func ticketsBeforeAndAfter() async throws {
        try await TestDatabase.with { database in
            let store = try await database.open()
            let ms = Int64(Self.start.timeIntervalSince1970 * 1000)
            // A row as the version before wrote it: the ticket's hash in the unique `ticket_hash`, nothing in
            // `ticket_check`.
            try await database.execute(
                """
                INSERT INTO signin_attempt (state_hash, nonce_hash, binding_hash, return_name, created_at, expires_at,
                    used_at, ticket_hash, ticket_expires_at, ticket_result, purge_at, started_by_app)
                VALUES (\(Data(Self.hash("fake-state-old"))), \(Data(Self.hash("fake-nonce-old"))),
                    \(Data(Self.hash("fake-binding-old"))), 'app', \(ms), \(ms + 600_000), \(ms),
                    \(Data(Self.hash("fake-ticket-old"))), \(ms + 300_000), \(Data("sealed-result-old".utf8)),
                    \(ms + 600_000), false)
                """
            )
            let index = try await database.rows(
                "SELECT indexdef FROM pg_indexes WHERE tablename = 'signin_attempt' AND indexdef LIKE '%(ticket_hash)%'"
            ).map { try $0.decode(String.self) }
            #expect(
                index.count == 1 && index[0].contains("UNIQUE") && index[0].contains("WHERE (ticket_hash IS NOT NULL)"),
                "old tickets' hashes stay unique, in an index without the NULL of every later attempt: \(index)"
            )
            let old = SignInTicketKey(ticketHash: Self.hash("fake-ticket-old"))
            #expect(try await store.unredeemedSignInTicket(old, at: Self.start) == Array("sealed-result-old".utf8))
            #expect(
                try await store.redeemSignInTicket(old, at: Self.start)?.sealedResult
                    == Array("sealed-result-old".utf8)
            )
            #expect(try await store.redeemSignInTicket(old, at: Self.start) == nil, "once")

            let attempt = SignInAttempt(
                stateHash: Self.hash("fake-state-new"),
                nonceHash: Self.hash("fake-nonce-new"),
                bindingHash: Self.hash("fake-binding-new"),
                returnName: "app",
                createdAt: Self.start,
                expiresAt: Self.start.addingTimeInterval(600)
            )
            try await store.createSignInAttempt(attempt)
            let ticket = SignInTicket(
                ticketHash: Self.hash("fake-ticket-new"),
                sealedResult: Array("sealed-result-new".utf8),
                expiresAt: Self.start.addingTimeInterval(300)
            )
            let completion = try await store.completeSignIn(
                SignInCompletionRequest(
                    stateHash: attempt.stateHash,
                    bindingHash: attempt.bindingHash,
                    now: Self.start,
                    attempt: attempt,
                    ticket: { _ in ticket }
                ),
                capture: nil,
                actor: .http(token: "signin"),
                lifecycle: EscrowLifecycle()
            )
            #expect({ if case .completed = completion { true } else { false } }(), "completes: \(completion)")
            let stored = try await database.rows(
                """
                SELECT ticket_hash IS NULL, ticket_check FROM signin_attempt
                WHERE state_hash = \(Data(attempt.stateHash))
                """
            ).map { try $0.decode((Bool, Data?).self) }
            #expect(stored.first?.0 == true, "nothing is written to ticket_hash's unique index")
            #expect(stored.first?.1 == Data(ticket.ticketHash))
            let key = SignInTicketKey(stateHash: attempt.stateHash, ticketHash: ticket.ticketHash)
            #expect(try await store.redeemSignInTicket(key, at: Self.start)?.sealedResult == ticket.sealedResult)
            await store.close()
        }
    }
}
