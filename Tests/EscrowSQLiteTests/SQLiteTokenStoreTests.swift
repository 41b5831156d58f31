import EscrowCore
import EscrowTestSupport
import Foundation
import GRDB
import Logging
import Testing

@testable import EscrowSQLite

#if canImport(Glibc)
import Glibc
#endif

/// The token file: a real SQLite file in rollback-journal mode, apart from the escrow database.
@Suite("SQLite token store")
struct SQLiteTokenStoreTests {
    let directory = TemporaryDirectory()
    var path: String { directory.path + "/tokens.sqlite" }

    func open(_ path: String? = nil, busyTimeout: Double = 5) throws -> SQLiteTokenStore {
        var configuration = SQLiteTokenStore.Configuration()
        configuration.busyTimeout = busyTimeout
        return try SQLiteTokenStore(
            path: path ?? self.path,
            configuration: configuration,
            logger: Logger(label: "test")
        )
    }

    static func record(_ name: String, _ scopes: Set<AccessTokenScope> = [.read], hash: UInt8) -> AccessTokenRecord {
        AccessTokenRecord(
            name: name,
            scopes: scopes,
            hash: [UInt8](repeating: hash, count: 32),
            createdAt: Date(timeIntervalSince1970: 1_700_000_000)
        )
    }

    /// Lookups are kept between requests (the file's change counter says when to read again): a change by any
    /// writer is seen by the very next lookup.
    @Test("a kept lookup is read again after a revocation by another connection, another process, or in WAL mode")
    func keptLookupsFollowTheFile() async throws {
        let store = try open()
        let hash = [UInt8](repeating: 7, count: 32)
        try await store.addToken(Self.record("registration", [.capture], hash: 7))
        #expect(try await store.token(hash: hash)?.isRevoked == false)
        #expect(store.lookups.record(hash: hash, at: store.lookups.currentVersion()) != nil, "the lookup is kept")

        // Another connection (as `tokens revoke` in another process is).
        let other = try open()
        #expect(try await other.revokeToken(name: "registration", at: Date(timeIntervalSince1970: 1_700_000_200)))
        #expect(try await store.token(hash: hash)?.isRevoked == true)

        // Another process, with SQLite's own library, adding a token and revoking it by hand.
        try await store.addToken(Self.record("second", [.capture], hash: 8))
        let second = [UInt8](repeating: 8, count: 32)
        #expect(try await store.token(hash: second)?.isRevoked == false)
        try await Self.python(
            path,
            "c.execute('UPDATE access_token SET revoked_at = 1700000300000 WHERE name = ?', ('second',))"
        )
        #expect(try await store.token(hash: second)?.isRevoked == true)

        // Someone else's WAL mode, in which writes leave the change counter alone: nothing is kept, so the kept
        // revoked record is not what the next lookup answers.
        try await Self.python(
            path,
            "c.execute('PRAGMA journal_mode=WAL'); "
                + "c.execute('UPDATE access_token SET revoked_at = NULL WHERE name = ?', ('second',))"
        )
        #expect(store.lookups.currentVersion() == nil, "a WAL-mode file is never trusted to the cache")
        #expect(try await store.token(hash: second)?.isRevoked == false)
    }

    /// Runs `statements` on the file at `path` in a python3 process (SQLite's own library, another process).
    static func python(_ path: String, _ statements: String) async throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c",
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10); " + statements
                + "; c.close()",
            path,
        ]
        try process.run()
        await process.exited()
        guard process.terminationStatus == 0 else {
            throw EscrowStoreError(.failed, "python3 sqlite3 exited \(process.terminationStatus)")
        }
    }

    @Test("add, list, look up by hash, revoke, add a revoked name again")
    func lifecycle() async throws {
        let store = try open()
        try await store.addToken(Self.record("registration", [.capture, .read], hash: 1))
        try await store.addToken(Self.record("prometheus", [.metrics], hash: 2))

        let listed = try await store.tokens()
        #expect(listed.map(\.name) == ["prometheus", "registration"])
        #expect(listed[1].scopes == [.capture, .read])
        #expect(listed[1].createdAt == Date(timeIntervalSince1970: 1_700_000_000))
        #expect(listed.allSatisfy { !$0.isRevoked })

        #expect(try await store.token(hash: [UInt8](repeating: 1, count: 32))?.name == "registration")
        #expect(try await store.token(hash: [UInt8](repeating: 2, count: 32))?.scopes == [.metrics])
        #expect(try await store.token(hash: [UInt8](repeating: 3, count: 32)) == nil)

        let now = Date(timeIntervalSince1970: 1_700_000_100)
        #expect(try await store.revokeToken(name: "registration", at: now))
        #expect(try await !store.revokeToken(name: "registration", at: now), "already revoked")
        #expect(try await !store.revokeToken(name: "nobody", at: now))
        let revoked = try #require(try await store.token(hash: [UInt8](repeating: 1, count: 32)))
        #expect(revoked.revokedAt == now)
        #expect(try await store.token(hash: [UInt8](repeating: 2, count: 32))?.isRevoked == false)

        // A revoked name can be added again, with a new token; the old one is gone.
        try await store.addToken(Self.record("registration", [.read], hash: 4))
        #expect(try await store.token(hash: [UInt8](repeating: 1, count: 32)) == nil)
        #expect(try await store.token(hash: [UInt8](repeating: 4, count: 32))?.isRevoked == false)
        #expect(try await store.tokens().count == 2)
    }

    @Test("an active name cannot be added twice")
    func duplicateNameRefused() async throws {
        let store = try open()
        try await store.addToken(Self.record("registration", hash: 1))
        let error = await #expect(throws: EscrowStoreError.self) {
            try await store.addToken(Self.record("registration", hash: 2))
        }
        #expect(error?.code == .tokenExists)
        #expect(try await store.token(hash: [UInt8](repeating: 2, count: 32)) == nil)
        #expect(try await store.token(hash: [UInt8](repeating: 1, count: 32))?.name == "registration")
    }

    @Test("the file is created 0600, its missing directory 0700")
    func fileModes() throws {
        let nested = directory.path + "/new/dir/tokens.sqlite"
        let store = try open(nested)
        defer { try? store.close() }
        let file = try FileManager.default.attributesOfItem(atPath: nested)
        #expect((file[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let parent = try FileManager.default.attributesOfItem(atPath: directory.path + "/new/dir")
        #expect((parent[.posixPermissions] as? NSNumber)?.intValue == 0o700)
    }

    @Test("rollback-journal mode: journal_mode=delete, synchronous=EXTRA, secure_delete, never WAL on disk")
    func journalMode() async throws {
        let store = try open()
        try await store.addToken(Self.record("registration", hash: 1))
        let (mode, synchronous, secureDelete) = try await store.queue.read { db in
            (
                try String.fetchOne(db, sql: "PRAGMA journal_mode"), try Int.fetchOne(db, sql: "PRAGMA synchronous"),
                try Int.fetchOne(db, sql: "PRAGMA secure_delete")
            )
        }
        #expect(mode == "delete")
        #expect(synchronous == 3, "EXTRA: the commit (the journal unlink) is durable once the folder is synced")
        #expect(secureDelete == 1)
        #expect(try Self.headerVersions(path) == [1, 1], "file format bytes 18-19: 1 = rollback journal, 2 = WAL")
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }

    @Test("a file someone left in WAL mode is converted back to rollback-journal mode")
    func walFileConverted() async throws {
        var configuration = GRDB.Configuration()
        configuration.journalMode = .wal
        let wal = try DatabaseQueue(path: path, configuration: configuration)
        try await wal.write { try $0.execute(sql: "CREATE TABLE unrelated (x INTEGER)") }
        try wal.close()
        #expect(try Self.headerVersions(path) == [2, 2])

        let store = try open()
        try await store.addToken(Self.record("registration", hash: 1))
        #expect(try Self.headerVersions(path) == [1, 1])
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }

    @Test("two connections (serve and the CLI): each sees the other's changes at the next call")
    func noCache() async throws {
        let serve = try open()
        let cli = try open()
        let hash = [UInt8](repeating: 7, count: 32)
        #expect(try await serve.token(hash: hash) == nil)
        try await cli.addToken(Self.record("ci", hash: 7))
        #expect(try await serve.token(hash: hash)?.isRevoked == false)
        #expect(try await cli.revokeToken(name: "ci", at: Date()))
        #expect(try await serve.token(hash: hash)?.isRevoked == true)
    }

    @Test("while another process holds the file's lock, reads and writes wait (busy timeout), then succeed")
    func waitsForAnotherProcess() async throws {
        let store = try open()
        try await store.addToken(Self.record("registration", hash: 1))
        let holder = try LockHolder(path: path, seconds: 0.6)
        let started = Date()
        #expect(try await store.token(hash: [UInt8](repeating: 1, count: 32))?.name == "registration")
        try await store.addToken(Self.record("ci", hash: 2))
        #expect(Date().timeIntervalSince(started) > 0.3, "the exclusive lock was held: the calls waited")
        await holder.wait()
        #expect(try await store.tokens().count == 2)
    }

    @Test("past the busy timeout: a PII-free store error, and nothing written")
    func busyTimeoutError() async throws {
        let store = try open(busyTimeout: 0.05)
        let holder = try LockHolder(path: path, seconds: 1)
        let error = await #expect(throws: EscrowStoreError.self) {
            try await store.addToken(Self.record("secret-name-canary", hash: 1))
        }
        #expect(error?.code == .failed)
        #expect(error.map { !$0.description.contains("secret-name-canary") } == true)
        await holder.wait()
        #expect(try await store.tokens().isEmpty)
    }

    @Test("the escrow database no longer has a token table")
    func escrowDatabaseHasNoTokens() throws {
        let store = try SQLiteEscrowStore(path: directory.path + "/escrow.sqlite", logger: Logger(label: "test"))
        defer { try? store.close() }
        let (tokens, notifications) = try store.pool.read { db in
            (try db.tableExists("access_token"), try db.tableExists("apple_notification"))
        }
        #expect(!tokens)
        #expect(notifications, "the Apple notification log stays in the escrow database")
    }

    /// The two file-format bytes of a SQLite header (18, 19): 1 for rollback journal, 2 for WAL.
    static func headerVersions(_ path: String) throws -> [UInt8] {
        let data = try #require(FileManager.default.contents(atPath: path))
        return [data[18], data[19]]
    }
}

/// Another process (python3's sqlite3) holding an EXCLUSIVE lock on a SQLite file for a while.
struct LockHolder {
    let process = ChildProcess()

    init(path: String, seconds: Double) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c",
            // The lock is held for `seconds` of real time: what waits for it is SQLite in this process.
            "import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1], isolation_level=None); "
                + "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(float(sys.argv[2])); "
                + "c.execute('COMMIT')",
            path, "\(seconds)",
        ]
        let ready = Pipe()
        process.standardOutput = ready
        try process.run()
        let line = ready.fileHandleForReading.availableData
        guard String(decoding: line, as: UTF8.self).hasPrefix("locked") else {
            process.terminate()
            throw EscrowStoreError(.unavailable, "the lock holder did not start")
        }
    }

    func wait() async {
        await process.exited()
    }
}
