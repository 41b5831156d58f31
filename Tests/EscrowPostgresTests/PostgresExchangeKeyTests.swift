import EscrowCore
import EscrowCrypto
import EscrowPostgres
import EscrowTestSupport
import Foundation
import PostgresNIO
import Testing

/// Apple token exchanges in PostgreSQL: named by their escrow and code, the table still keyed by the code, so that
/// nodes are upgraded one at a time.
@Suite("PostgreSQL: Apple token exchanges while nodes are upgraded one at a time")
struct PostgresExchangeKeyTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    @Test("a code queued by a node of the version before, by the code's key, is claimed and ended by escrow and code")
    func codeQueuedByAnEarlierNode() async throws {
        try await TestDatabase.with { database in
            let store = try await database.open()
            let ms = Int64(Self.start.timeIntervalSince1970 * 1000)
            // The escrow the code came with: a real sealed record of an obviously fake profile.
            let keyring = Keyring.generate()
            let index = keyring.blindIndex(userIdentifier: "000000.fake-earlier-node.0001")
            let plaintext = SecretBytes(copying: Array("fake-profile".utf8))
            let record = EscrowRecord(
                sealed: try keyring.seal(plaintext: plaintext, id: EscrowID.new(at: Self.start), blindIndex: index),
                contentTag: keyring.contentTag(blindIndex: index, plaintext: plaintext),
                createdAt: Self.start,
                expiresAt: Self.start.addingTimeInterval(3600)
            )
            _ = try await store.capture(record, actor: .library, lifecycle: EscrowLifecycle())
            let escrowID = record.id
            let codeHash = FakeSignIn.hash("fake-code-earlier-node")
            // The earlier version's statement, word for word but for the values.
            let insert: PostgresQuery = try """
            INSERT INTO apple_token_exchange (code_hash, escrow_id, client_id, redirect_uri, key_version,
                sealed_code, attempts, next_attempt_at, created_at, expires_at)
            VALUES (\(Data(codeHash)), \(Data(escrowID.bytes)), 'com.example.fake.app', NULL, 1,
                \(Data("sealed-code-fake".utf8)), 0, \(ms), \(ms), \(ms + 300_000))
            ON CONFLICT (code_hash) DO NOTHING RETURNING 1
            """
            #expect(try await database.rows(insert).count == 1, "queued")
            #expect(try await database.rows(insert).isEmpty, "once")
            let claimed = try await store.claimAppleExchanges(at: Self.start, limit: 10, lease: 30)
            #expect(claimed.map(\.key) == [AppleTokenExchange.Key(escrowID: escrowID, codeHash: codeHash)])
            #expect(
                try await store.endAppleExchange(
                    AppleTokenExchange.Key(escrowID: escrowID, codeHash: codeHash),
                    attempts: 1,
                    outcome: .refused("invalid_grant"),
                    at: Self.start
                )
            )
            #expect(try await store.appleExchanges(escrowID: escrowID).first?.outcome == .refused("invalid_grant"))
            await store.close()
        }
    }
}
