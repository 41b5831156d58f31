import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import GRDB
import Logging
import Testing

@testable import EscrowSQLite

@Suite("SQLite schema v16: an exchange keyed by its escrow and code")
struct SQLiteExchangeMigrationTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    @Test("the exchanges queued before v16, running and ended, are kept and still claimed and ended by their key")
    func exchangesQueuedBefore() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/escrow.sqlite"
        let ms = Timestamp.unixMilliseconds(Self.start)
        let running = EscrowID.new(at: Self.start)
        let ended = EscrowID.new(at: Self.start.addingTimeInterval(-60))
        do {
            let pool = try DatabasePool(path: path)
            try SQLiteSchema.migrator.migrate(pool, upTo: "v15")
            try await pool.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO apple_token_exchange (code_hash, escrow_id, client_id, redirect_uri, key_version,
                            sealed_code, attempts, next_attempt_at, created_at, expires_at, sealed_tokens, error,
                            ended_at)
                        VALUES (?, ?, 'com.example.fake.web', 'https://fake.example/cb', 3, ?, 0, ?, ?, ?,
                            NULL, NULL, NULL),
                            (?, ?, 'com.example.fake.app', NULL, 3, x'', 1, ?, ?, ?, ?, NULL, ?)
                        """,
                    arguments: [
                        Data(FakeSignIn.hash("fake-code-running")), Data(running.bytes),
                        Data("sealed-code-running".utf8), ms, ms, ms + 300_000,
                        Data(FakeSignIn.hash("fake-code-ended")), Data(ended.bytes), ms - 30_000, ms - 60_000,
                        ms + 240_000, Data("sealed-tokens-ended".utf8), ms - 30_000,
                    ]
                )
            }
            try pool.close()
        }
        let store = try SQLiteEscrowStore(path: path, logger: Logger(label: "test"))

        let kept = try await store.appleExchanges(escrowID: ended)
        #expect(kept.count == 1)
        #expect(kept.first?.outcome == .tokens(sealed: Array("sealed-tokens-ended".utf8)), "a refresh token kept")
        #expect(kept.first?.codeHash == FakeSignIn.hash("fake-code-ended"))
        #expect(kept.first?.redirectURI == nil && kept.first?.clientID == "com.example.fake.app")

        let claimed = try await store.claimAppleExchanges(at: Self.start, limit: 10, lease: 30)
        #expect(claimed.map(\.escrowID) == [running], "the running one, found by its due time")
        #expect(claimed.first?.sealedCode == Array("sealed-code-running".utf8))
        #expect(claimed.first?.redirectURI == "https://fake.example/cb" && claimed.first?.keyVersion == 3)
        let key = AppleTokenExchange.Key(escrowID: running, codeHash: FakeSignIn.hash("fake-code-running"))
        #expect(claimed.first?.key == key)
        #expect(try await store.endAppleExchange(key, attempts: 1, outcome: .refused("invalid_grant"), at: Self.start))
        #expect(try await store.appleExchanges(escrowID: running).first?.outcome == .refused("invalid_grant"))
        #expect(try await store.runningAppleExchangeCount() == 0)

        // The table is keyed by (escrow_id, code_hash), without rowids; its only other index is the due one; the
        // escrow's purge still deletes its exchanges.
        let (primaryKey, indexes, trigger, withoutRowID) = try await store.read { db in
            let columns = try Row.fetchAll(db, sql: "PRAGMA table_info(apple_token_exchange)")
                .filter { ($0["pk"] as Int) > 0 }
                .sorted { ($0["pk"] as Int) < ($1["pk"] as Int) }
                .map { $0["name"] as String }
            let indexes = try Row.fetchAll(db, sql: "PRAGMA index_list(apple_token_exchange)")
                .map { $0["name"] as String }
                .filter { !$0.hasPrefix("sqlite_autoindex") }
            let trigger = try String.fetchOne(
                db,
                sql: "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'apple_token_exchange_purged'"
            )
            let table = try String.fetchOne(
                db,
                sql: "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'apple_token_exchange'"
            )
            return (columns, indexes, trigger, table?.contains("WITHOUT ROWID") == true)
        }
        #expect(primaryKey == ["escrow_id", "code_hash"])
        #expect(indexes == ["apple_token_exchange_due"])
        #expect(withoutRowID)
        #expect(trigger?.contains("DELETE FROM apple_token_exchange WHERE escrow_id = OLD.id") == true)
    }
}
