import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import GRDB
import Glibc
import Logging
import ProfileEscrow
import Testing

@testable import EscrowSQLite

@Suite("Store safety")
struct StoreSafetyTests {
    /// Two stores on one file hold two open files, so their write locks exclude each other exactly as two
    /// processes' do: both write at once, serialised, and nothing is lost or forked.
    @Test func twoWritersOnOneFileBothWriteAndReadersStillWork() async throws {
        let harness = try EscrowFixture()
        let other = try SQLiteEscrowStore(path: harness.databasePath, logger: Logger(label: "t"))
        let otherEscrow = Escrow(store: other, keyring: harness.keyring, logger: Logger(label: "t"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for number in 0..<60 {
                group.addTask {
                    let escrow = number % 2 == 0 ? harness.escrow : otherEscrow
                    _ = try await escrow.capture(try Fake.profile(number))
                    if number % 3 == 0 { _ = try await escrow.confirm(userIdentifier: Fake.userIdentifier(number)) }
                }
            }
            try await group.waitForAll()
        }
        try await other.flushPurged()
        var readOnly = SQLiteEscrowStore.Configuration()
        readOnly.readOnly = true
        let reader = try SQLiteEscrowStore(
            path: harness.databasePath,
            configuration: readOnly,
            logger: Logger(label: "t")
        )
        #expect(try await reader.summary(at: Date()).live[.pending] == 40)
        let report = try await PurgeReport.build(store: reader, verify: true)
        #expect(report.chain?.verified == true && report.chain?.events == 60 + 20)
        let integrity = try await harness.store.pool.read { try String.fetchOne($0, sql: "PRAGMA integrity_check") }
        #expect(integrity == "ok")
        await #expect(throws: EscrowStoreError.self) {
            try await reader.appendAudit([AuditDraft(type: .keysRotated, at: Date(), actor: .cli)])
        }
    }

    /// A writer waits while another process holds the write lock, and after the bound fails with a clear
    /// `store_busy` that wrote nothing; once the lock is free it writes.
    @Test func aWriterWaitsForTheLockBoundedThenFailsClearly() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/escrow.sqlite"
        var configuration = SQLiteEscrowStore.Configuration()
        configuration.writeLockTimeout = 0.3
        let store = try SQLiteEscrowStore(path: path, configuration: configuration, logger: Logger(label: "t"))
        // Another "process": its own open file on the lock, held.
        let holder = open(path + ".write-lock", O_RDWR)
        defer { close(holder) }
        #expect(flock(holder, LOCK_EX | LOCK_NB) == 0)
        let started = Date()
        do {
            try await store.appendAudit([AuditDraft(type: .keysRotated, at: Date(), actor: .cli)])
            Issue.record("wrote while another process held the write lock")
        } catch let error as EscrowStoreError {
            #expect(error.code == .busy)
            #expect(!error.message.contains("SQLITE_BUSY") && error.message.contains("write lock"))
        }
        #expect(Date().timeIntervalSince(started) >= 0.25, "it waited for the lock first")
        #expect(try await store.auditHead() == nil, "nothing was written")
        _ = flock(holder, LOCK_UN)
        try await store.appendAudit([AuditDraft(type: .keysRotated, at: Date(), actor: .cli)])
        #expect(try await store.auditHead()?.sequence == 1)
    }

    /// No connection checkpoints when it closes (the last one to close would, by default, outside the
    /// write lock): the `-wal` file outlives its connections; only a checkpoint under the lock empties it.
    @Test func closingNeverCheckpoints() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/escrow.sqlite"
        do {
            let store = try SQLiteEscrowStore(path: path, logger: Logger(label: "t"))
            // Only writes: the writer connection is the store's only one, and the last to close. By SQLite's
            // default it would checkpoint then, outside the write lock.
            try await store.appendAudit([AuditDraft(type: .keysRotated, at: Date(), actor: .cli)])
            try store.closeConnectionsOnly()  // as a killed process's connections close
            // A reader opens and closes last too (read-only connections never checkpoint).
            var readOnly = SQLiteEscrowStore.Configuration()
            readOnly.readOnly = true
            let reader = try SQLiteEscrowStore(path: path, configuration: readOnly, logger: Logger(label: "t"))
            _ = try await reader.summary(at: Date())
            try reader.close()
        }
        #expect(try Self.eventsInMainFile(path) == 0, "no close checkpointed the log into the database file")
        let store = try SQLiteEscrowStore(path: path, logger: Logger(label: "t"))
        try await store.flushPurged()
        #expect(try Self.eventsInMainFile(path) == 1, "a checkpoint under the lock did")
        let flushed = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int
        #expect(flushed == 0)
    }

    /// Audit events in the database file alone (a copy without its `-wal`).
    static func eventsInMainFile(_ path: String) throws -> Int {
        let copy = TemporaryDirectory()
        try FileManager.default.copyItem(atPath: path, toPath: copy.path + "/main.sqlite")
        return try DatabaseQueue(path: copy.path + "/main.sqlite").read { db in
            try db.tableExists("audit_event") ? Int.fetchOne(db, sql: "SELECT COUNT(*) FROM audit_event") ?? 0 : 0
        }
    }

    /// Embedded without the CLI's `umask 077`, the store's files are owner-only all the same.
    @Test func theStoresFilesAreOwnerOnlyWhateverTheUmask() async throws {
        let previous = umask(0o022)
        defer { umask(previous) }
        let harness = try EscrowFixture()
        _ = try await harness.escrow.capture(try Fake.profile(1))
        let tokens = try SQLiteTokenStore(path: harness.directory.path + "/tokens.sqlite", logger: Logger(label: "t"))
        try tokens.close()
        for suffix in ["", "-wal", "-shm", ".write-lock"] {
            let path = harness.databasePath + suffix
            let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(suffix.isEmpty ? "database" : suffix) has mode \(String(mode ?? 0, radix: 8))")
        }
        let tokenMode =
            try FileManager.default.attributesOfItem(atPath: harness.directory.path + "/tokens.sqlite")[
                .posixPermissions
            ] as? Int
        #expect(tokenMode == 0o600)
    }

    @Test func pragmasAreAsSpecified() async throws {
        let harness = try EscrowFixture()
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
        let harness = try EscrowFixture()
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
