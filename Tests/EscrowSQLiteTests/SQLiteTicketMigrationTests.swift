import EscrowCore
import EscrowTestSupport
import Foundation
import GRDB
import Logging
import Testing

@testable import EscrowSQLite

@Suite("SQLite schema v15: tickets found by their attempt")
struct SQLiteTicketMigrationTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    @Test("a ticket issued before v15 (its hash in the unique index) still redeems once by its hash alone")
    func ticketIssuedBefore() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/escrow.sqlite"
        let ms = Timestamp.unixMilliseconds(Self.start)
        do {
            let pool = try DatabasePool(path: path)
            try SQLiteSchema.migrator.migrate(pool, upTo: "v14")
            try await pool.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO signin_attempt (state_hash, nonce_hash, binding_hash, return_name, created_at,
                            expires_at, used_at, ticket_hash, ticket_expires_at, ticket_result, purge_at, started_by_app)
                        VALUES (?, ?, ?, 'app', ?, ?, ?, ?, ?, ?, ?, 0)
                        """,
                    arguments: [
                        Data(FakeSignIn.hash("fake-state-old")), Data(FakeSignIn.hash("fake-nonce-old")),
                        Data(FakeSignIn.hash("fake-binding-old")), ms, ms + 600_000, ms,
                        Data(FakeSignIn.hash("fake-ticket-old")), ms + 300_000, Data("sealed-result-old".utf8),
                        ms + 600_000,
                    ]
                )
            }
            try pool.close()
        }
        let store = try SQLiteEscrowStore(path: path, logger: Logger(label: "test"))
        let old = SignInTicketKey(ticketHash: FakeSignIn.hash("fake-ticket-old"))
        #expect(try await store.unredeemedSignInTicket(old, at: Self.start) == Array("sealed-result-old".utf8))
        #expect(
            try await store.redeemSignInTicket(
                SignInTicketKey(
                    stateHash: FakeSignIn.hash("fake-state-old"),
                    ticketHash: FakeSignIn.hash("fake-ticket-old")
                ),
                at: Self.start
            ) == nil,
            "a ticket stored before has no hash in its row to check"
        )
        let redeemed = try await store.redeemSignInTicket(old, at: Self.start)
        #expect(redeemed == SignInRedemption(sealedResult: Array("sealed-result-old".utf8), returnName: "app"))
        #expect(try await store.redeemSignInTicket(old, at: Self.start) == nil, "once")
        // The old tickets' hashes stay unique, in an index that holds no entry for the attempts without one.
        let partial = try await store.read { db in
            try Row.fetchAll(db, sql: "PRAGMA index_list(signin_attempt)")
                .filter { ($0["name"] as String) == "signin_attempt_ticket_hash" }
                .map { ($0["unique"] as Bool, $0["partial"] as Bool) }
        }
        #expect(partial.count == 1 && partial[0] == (true, true))
        let raw = try DatabaseQueue(path: path)
        let duplicate = #expect(throws: DatabaseError.self) {
            try raw.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO signin_attempt (state_hash, nonce_hash, binding_hash, return_name, created_at,
                            expires_at, ticket_hash, purge_at)
                        SELECT x'00', nonce_hash, binding_hash, return_name, created_at, expires_at, ticket_hash, purge_at
                        FROM signin_attempt
                        """
                )
            }
        }
        #expect(duplicate?.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE, "a second row with an old ticket's hash")
    }

    @Test("a ticket issued now is kept in its attempt's row and leaves the ticket index alone")
    func ticketIssuedNow() async throws {
        let directory = TemporaryDirectory()
        let store = try SQLiteEscrowStore(path: directory.path + "/escrow.sqlite", logger: Logger(label: "test"))
        let signIn = try await FakeSignIn.complete("new", in: store, at: Self.start)
        #expect(signIn.completed, "completes: \(signIn.completion)")
        let (indexed, checked) = try await store.read { db in
            let row = try Row.fetchOne(db, sql: "SELECT ticket_hash, ticket_check FROM signin_attempt")
            return (row?["ticket_hash"] as Data?, row?["ticket_check"] as Data?)
        }
        #expect(indexed == nil, "nothing is written to ticket_hash's unique index")
        #expect(checked == Data(signIn.ticket.ticketHash))
        #expect(
            try await store.redeemSignInTicket(signIn.key, at: Self.start)?.sealedResult == signIn.ticket.sealedResult
        )
    }
}
