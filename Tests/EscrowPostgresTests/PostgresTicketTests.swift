import EscrowCore
import EscrowPostgres
import EscrowTestSupport
import Foundation
import PostgresNIO
import Testing

/// Tickets in PostgreSQL since migration 13: kept in their attempt's row (`ticket_check`, no index), found by its key;
/// a ticket an earlier version stored by its hash alone still redeems.
@Suite("PostgreSQL: sign-in tickets found by their attempt")
struct PostgresTicketTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

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
                VALUES (\(Data(FakeSignIn.hash("fake-state-old"))), \(Data(FakeSignIn.hash("fake-nonce-old"))),
                    \(Data(FakeSignIn.hash("fake-binding-old"))), 'app', \(ms), \(ms + 600_000), \(ms),
                    \(Data(FakeSignIn.hash("fake-ticket-old"))), \(ms + 300_000), \(Data("sealed-result-old".utf8)),
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
            let old = SignInTicketKey(ticketHash: FakeSignIn.hash("fake-ticket-old"))
            #expect(try await store.unredeemedSignInTicket(old, at: Self.start) == Array("sealed-result-old".utf8))
            #expect(
                try await store.redeemSignInTicket(old, at: Self.start)?.sealedResult
                    == Array("sealed-result-old".utf8)
            )
            #expect(try await store.redeemSignInTicket(old, at: Self.start) == nil, "once")

            let signIn = try await FakeSignIn.complete("new", in: store, at: Self.start)
            #expect(signIn.completed, "completes: \(signIn.completion)")
            let stored = try await database.rows(
                """
                SELECT ticket_hash IS NULL, ticket_check FROM signin_attempt
                WHERE state_hash = \(Data(signIn.attempt.stateHash))
                """
            ).map { try $0.decode((Bool, Data?).self) }
            #expect(stored.first?.0 == true, "nothing is written to ticket_hash's unique index")
            #expect(stored.first?.1 == Data(signIn.ticket.ticketHash))
            #expect(
                try await store.redeemSignInTicket(signIn.key, at: Self.start)?.sealedResult
                    == signIn.ticket.sealedResult
            )
            await store.close()
        }
    }
}
