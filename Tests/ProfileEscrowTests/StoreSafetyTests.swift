import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import GRDB
import Logging
import ProfileEscrow
import Testing

@testable import EscrowSQLite

@Suite("Store safety")
struct StoreSafetyTests {
    @Test func aSecondWriterIsRefusedAndReadersStillWork() async throws {
        let harness = try Harness()
        _ = try await harness.escrow.capture(try Fake.profile(1))
        do {
            _ = try SQLiteEscrowStore(path: harness.databasePath, logger: Logger(label: "t"))
            Issue.record("a second writer opened the store")
        } catch let error as EscrowStoreError {
            #expect(error.code == .writerLocked)
            #expect(error.message.contains("pid \(getpid())"))
        }
        var readOnly = SQLiteEscrowStore.Configuration()
        readOnly.readOnly = true
        let reader = try SQLiteEscrowStore(
            path: harness.databasePath,
            configuration: readOnly,
            logger: Logger(label: "t")
        )
        #expect(try await reader.summary(at: Date()).live[.pending] == 1)
        await #expect(throws: EscrowStoreError.self) {
            try await reader.appendAudit([AuditDraft(type: .keysRotated, at: Date(), actor: .cli)])
        }
    }

    @Test func theWriterSlotIsFreedWhenTheStoreGoesAway() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/escrow.sqlite"
        do {
            let first = try SQLiteEscrowStore(path: path, logger: Logger(label: "t"))
            try first.close()
        }
        let second = try SQLiteEscrowStore(path: path, logger: Logger(label: "t"))
        #expect(second.holdsWriterSlot)
    }

    @Test func closeFreesTheWriterSlotWhileTheStoreIsStillReferenced() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/escrow.sqlite"
        let first = try SQLiteEscrowStore(path: path, logger: Logger(label: "t"))
        try #require(first.holdsWriterSlot, "this SQLite needs no writer slot: nothing to free")
        try first.close()
        let second = try SQLiteEscrowStore(path: path, logger: Logger(label: "t"))
        #expect(second.holdsWriterSlot)
        withExtendedLifetime(first) {}
    }

    @Test func pragmasAreAsSpecified() async throws {
        let harness = try Harness()
        let values = try await harness.store.pool.write { db in
            (
                try String.fetchOne(db, sql: "PRAGMA journal_mode"),
                try Int.fetchOne(db, sql: "PRAGMA synchronous"),
                try Int.fetchOne(db, sql: "PRAGMA secure_delete"),
                try Int.fetchOne(db, sql: "PRAGMA foreign_keys")
            )
        }
        #expect(values.0 == "wal")
        #expect(values.1 == 2, "synchronous=FULL")
        #expect(values.2 == 1, "secure_delete=ON")
        #expect(values.3 == 1)
    }

    @Test func badInputStoresNothing() async throws {
        let harness = try Harness()
        let bodies = [
            #"{"userIdentifier":"000000.fake.0001"}"#,
            #"{"userIdentifier":"bad id","email":"canarymail1@example.invalid"}"#,
            #"{"userIdentifier":"000000.fake.0001","email":"canarymail1@example.invalid","extra":1}"#,
            #"{"userIdentifier":"000000.fake.0001","email":"canarymail1@example.invalid""#,
            String(repeating: " ", count: 16 * 1024 + 1),
        ]
        for body in bodies {
            await #expect(throws: ProfileValidationError.self) {
                _ = try await harness.escrow.capture(json: Array(body.utf8))
            }
        }
        #expect(try await harness.store.auditHead() == nil)
        #expect(try await harness.store.summary(at: Date()).live.values.reduce(0, +) == 0)
    }
}
