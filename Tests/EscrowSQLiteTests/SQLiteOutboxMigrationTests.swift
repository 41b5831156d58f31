import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import GRDB
import Logging
import Testing

@testable import EscrowSQLite

@Suite("SQLite schema v7: the notification outbox")
struct SQLiteOutboxMigrationTests {
    @Test("a v6 store opens at v7: handled notifications kept, the outbox empty and usable")
    func fromV6() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/escrow.sqlite"
        let handled = Hashing.blake2b256(Array("fake-v6-jti".utf8))
        do {
            let pool = try DatabasePool(path: path)
            try SQLiteSchema.migrator.migrate(pool, upTo: "v6")
            try await pool.write { db in
                try db.execute(
                    sql: "INSERT INTO apple_notification (jti_hash, received_at) VALUES (?, 0)",
                    arguments: [Data(handled)]
                )
            }
            try pool.close()
        }
        let store = try SQLiteEscrowStore(path: path, logger: Logger(label: "test"))
        let applied = try await store.read { db in try SQLiteSchema.migrator.appliedIdentifiers(db) }
        #expect(applied.contains("v7"))
        #expect(try await store.hasNotification(idHash: handled), "the v6 rows are kept")
        #expect(try await store.outboxCount() == 0)
        let keyring = Keyring.generate()
        let (version, sealed) = try keyring.sealNotification(Array("{}".utf8), webhookID: "apple-00")
        let now = Date()
        let entry = OutboxEntry(
            webhookID: "apple-00",
            keyVersion: version,
            sealedBody: sealed,
            nextAttemptAt: now,
            createdAt: now
        )
        let recorded = try await store.recordNotification(
            idHash: Hashing.blake2b256(Array("fake-v7-jti".utf8)),
            at: now,
            forward: [entry],
            capacity: 10
        )
        #expect(recorded == .queued)
        #expect(try await store.claimOutbox(at: now, limit: 1, lease: 60).map(\.webhookID) == ["apple-00"])
    }
}
