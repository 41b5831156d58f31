public import EscrowCore
import Foundation
import GRDB
public import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The HTTP API's bearer tokens (hashes only) in their own small SQLite file, apart from the escrow
/// database, so that `tokens add` and `tokens revoke` never wait behind the escrow database's write lock.
///
/// Rollback-journal mode (`journal_mode=DELETE`), never WAL: the WAL-reset corruption bug of SQLite
/// before 3.51.3 exists only in WAL mode, and a rollback-journal file is safe with several processes
/// reading and writing it (file locks, and a busy timeout to wait for them). `synchronous=EXTRA`: in
/// DELETE mode a transaction commits by unlinking its journal, and only EXTRA also syncs the folder after that
/// unlink; with FULL a power cut can bring the journal back, and SQLite then rolls the committed change (a
/// revocation) back. So a revocation is on disk when the command returns and `secure_delete=ON`. Writes take the file's
/// lock at once (IMMEDIATE transactions), so two writers never deadlock on a lock upgrade.
///
/// A lookup by hash is kept while the file's change counter says nothing was written since
/// (``TokenLookupCache``), so a token added or revoked by another process is seen by the next request.
public final class SQLiteTokenStore: AccessTokenStore {
    public struct Configuration: Sendable {
        /// How long a statement waits for a lock held by another connection or process.
        public var busyTimeout: Double = 5

        public init() {}
    }

    public let path: String
    public let configuration: Configuration

    let queue: DatabaseQueue
    let logger: Logger
    let lookups: TokenLookupCache

    /// Opens the token file at `path`, creating it (mode 0600, its directory 0700) when missing.
    public init(path: String, configuration: Configuration = Configuration(), logger: Logger) throws {
        self.path = path
        self.configuration = configuration
        self.logger = logger
        self.lookups = TokenLookupCache(path: path)
        try Self.createFileIfMissing(path)

        var config = GRDB.Configuration()
        config.journalMode = .default  // GRDB leaves the journal mode alone; we set DELETE below.
        config.busyMode = .timeout(configuration.busyTimeout)
        config.label = "tokens"
        config.prepareDatabase { db in
            // journal_mode is a no-op when the file is already DELETE; from WAL (someone else's doing)
            // it converts the file back, and fails while another connection has it open in WAL.
            let mode = try String.fetchOne(db, sql: "PRAGMA journal_mode = DELETE")
            guard mode?.lowercased() == "delete" else {
                throw EscrowStoreError(.unavailable, "SQLite refused journal_mode=DELETE for the token store")
            }
            try db.execute(sql: "PRAGMA synchronous = EXTRA")
            guard try Int.fetchOne(db, sql: "PRAGMA synchronous") == 3 else {
                throw EscrowStoreError(.unavailable, "SQLite refused synchronous=EXTRA for the token store")
            }
            try db.execute(sql: "PRAGMA secure_delete = ON")
        }
        do {
            queue = try DatabaseQueue(path: path, configuration: config)
            try Self.migrate(queue)
        } catch let error as EscrowStoreError {
            throw error
        } catch {
            throw EscrowStoreError(
                .unavailable,
                "cannot open the token store at \(path) (\(SQLiteEscrowStore.describe(error)))"
            )
        }
        logger.info("opened token store", metadata: ["path": "\(path)", "sqlite.journal_mode": "delete"])
    }

    /// Closes the database connection.
    public func close() throws {
        try queue.close()
    }

    /// Two processes that create the file at the same moment both see no migration applied; the
    /// second one's `CREATE TABLE` then fails. Its transaction rolls back, and the schema the first
    /// one made is the right one.
    private static func migrate(_ queue: DatabaseQueue) throws {
        let migrator = SQLiteTokenSchema.migrator
        do {
            try migrator.migrate(queue)
        } catch {
            guard try queue.read({ try migrator.hasCompletedMigrations($0) }) else { throw error }
        }
    }

    /// SQLite creates a new file with the process's umask (usually 0644) and its journal with the
    /// file's mode: make the file first, 0600.
    private static func createFileIfMissing(_ path: String) throws(EscrowStoreError) {
        guard !FileManager.default.fileExists(atPath: path) else { return }
        try StoreFiles.createParentDirectory(of: path)
        try StoreFiles.createOwnerOnlyFile(path)  // another process making it first is fine
    }

    /// A failed write or fsync stops the token store's writes as it stops the escrow store's (``DiskFailure``):
    /// the change's outcome is unknown, and later ones are refused until a restart.
    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let key = DiskFailure.key(path)
        try DiskFailure.check(key)
        do {
            // A writable DatabaseQueue's transactions are IMMEDIATE (GRDB's default).
            return try await queue.write(body)
        } catch let error as EscrowStoreError {
            throw error
        } catch {
            if DiskFailure.isFullDisk(error) {
                DiskFailure.mark(key, error, logger: logger)
                throw EscrowStoreError(
                    .unavailable,
                    "token store write refused: the disk is full (\(SQLiteEscrowStore.describe(error))); nothing was "
                        + "stored"
                )
            }
            if DiskFailure.isDiskError(error) {
                DiskFailure.mark(key, error, logger: logger)
                throw EscrowStoreError(
                    .unavailable,
                    "token store write failed with a disk error (\(SQLiteEscrowStore.describe(error))): whether the "
                        + "change is on disk is unknown"
                )
            }
            throw EscrowStoreError(.failed, "token store write failed (\(SQLiteEscrowStore.describe(error)))")
        }
    }

    /// Every read here is one SELECT, atomic on its own in autocommit mode, so it runs outside a
    /// transaction: GRDB's `read` would wrap it in BEGIN, COMMIT and two `PRAGMA query_only`, which
    /// doubled the cost of a lookup (measured, debug build: 128 µs → 69 µs; SQLite itself ~7 µs).
    ///
    /// Async: a lookup may wait (up to the busy timeout) while another process commits, and must not
    /// block a thread of the cooperative pool meanwhile.
    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do {
            return try await queue.unsafeRead(body)
        } catch let error as EscrowStoreError {
            throw error
        } catch {
            throw EscrowStoreError(.failed, "token store read failed (\(SQLiteEscrowStore.describe(error)))")
        }
    }
}
