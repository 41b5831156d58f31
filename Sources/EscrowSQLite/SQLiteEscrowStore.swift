import CSQLiteShim
public import EscrowCore
import EscrowCrypto
import Foundation
import GRDB
public import Logging
import NIOConcurrencyHelpers

/// The embedded default store: one SQLite file through GRDB.
///
/// WAL mode, `synchronous=FULL` (a capture returns only once its commit is on disk),
/// `secure_delete=ON`, foreign keys on. Purges are followed by a `wal_checkpoint(TRUNCATE)` so no
/// copy of a purged ciphertext survives in the `-wal` file.
///
/// Any number of processes may open one store for writing at once (the service, separate replay
/// workers, CLI commands). SQLite before 3.51.3 can corrupt a WAL database when two connections write
/// or checkpoint at once, so every write transaction and every checkpoint of every process takes one
/// cross-process lock (``WriteLock``), and no connection checkpoints when it closes: writers wait for
/// each other (bounded), and callers never see `SQLITE_BUSY`. Read-only stores never write and open
/// even in a read-only folder.
public final class SQLiteEscrowStore: EscrowStore {
    public struct Configuration: Sendable {
        /// Open without writing anything: for `status` and `purge-report`, also on a read-only folder.
        public var readOnly: Bool = false
        /// Checkpoint (TRUNCATE) after every purge. A busy service turns this off and calls
        /// ``flushPurged()`` every few seconds instead (batched).
        public var checkpointAfterPurge: Bool = true
        /// How long a statement waits for a lock held by another connection (readers, a checkpoint).
        public var busyTimeout: Double = 5
        /// How long a write waits for another process's write transaction or checkpoint to end before it
        /// fails with ``EscrowStoreError/Code/busy`` (nothing written).
        public var writeLockTimeout: Double = 30
        /// How long a web sign-in's callback waits for the write lock (its batch's oldest callback, from its call)
        /// before it fails with ``EscrowStoreError/Code/busy`` (nothing written): its browser then gets the page
        /// that posts the form again within seconds, instead of waiting out ``writeLockTimeout``.
        public var signInWriteLockTimeout: Double = 3

        public init() {}
    }

    /// The first SQLite version with the WAL-reset fix (3.51.3).
    public static let walResetFixedVersion = 3_051_003

    public let path: String
    public let configuration: Configuration
    /// `sqlite_version()` as a number, e.g. 3040001.
    public let sqliteVersion: Int
    /// How this store writes, for the startup log.
    public var mode: String {
        configuration.readOnly
            ? "read-only (never writes or checkpoints)"
            : "serialized writes: one cross-process lock around every write transaction and checkpoint"
    }

    let pool: DatabasePool
    let batcher: CaptureBatcher
    let committer: CommitBatcher
    /// Web sign-in callbacks' completions (capture and the attempt's use), grouped as captures are.
    let signInCommitter: SignInBatcher
    /// New sign-in attempts (a browser's start, an app's attempt), grouped as captures are, not waiting for the disk.
    let attemptCommitter: GroupCommit<SignInAttempt, Void>
    /// Nil when read-only.
    let writeLock: WriteLock?
    private let closed = NIOLockedValueBox(false)
    /// How many times ``summary(at:)`` ran: the tests check that a `/metrics` scrape never runs it.
    private let summaryQueries = NIOLockedValueBox(0)
    var summaryQueryCount: Int { summaryQueries.withLockedValue { $0 } }
    func countSummaryQuery() { summaryQueries.withLockedValue { $0 += 1 } }

    public init(path: String, configuration: Configuration = Configuration(), logger: Logger) throws {
        self.path = path
        self.configuration = configuration
        if !configuration.readOnly {
            try StoreFiles.createParentDirectory(of: path)
            try StoreFiles.createOwnerOnlyFile(path)
        }
        if configuration.readOnly, !FileManager.default.fileExists(atPath: path) {
            throw EscrowStoreError(.unavailable, "no store at \(path)")
        }
        let version = Self.libraryVersion()
        self.sqliteVersion = version
        let lock =
            configuration.readOnly
            ? nil : try WriteLock(databasePath: path, timeout: configuration.writeLockTimeout, logger: logger)
        self.writeLock = lock

        var config = GRDB.Configuration()
        config.readonly = configuration.readOnly
        config.busyMode = .timeout(configuration.busyTimeout)
        config.label = "escrow"
        config.prepareDatabase { db in
            // No connection, reader or writer, ever checkpoints when it closes: a checkpoint runs only under
            // the write lock (at commit, or from flushPurged).
            guard profile_escrow_sqlite3_disable_checkpoint_on_close(db.sqliteConnection) == 0 else {
                throw EscrowStoreError(.unavailable, "SQLite refused to disable the checkpoint on close")
            }
            if !db.configuration.readonly {
                try db.execute(sql: "PRAGMA secure_delete = ON")
                try db.execute(sql: "PRAGMA synchronous = FULL")
            }
            try db.execute(sql: "PRAGMA foreign_keys = ON")
        }
        do {
            if let lock {
                // Opening sets WAL mode and migrations write: under the lock, like every write.
                self.pool = try lock.withLock {
                    let pool = try DatabasePool(path: path, configuration: config)
                    // GRDB sets synchronous=NORMAL on the pool's writer after `prepareDatabase` (its WAL
                    // default). A capture must be durable when acknowledged: FULL, on the one writer
                    // connection the pool keeps for its whole life.
                    try pool.writeWithoutTransaction { db in
                        try db.execute(sql: "PRAGMA synchronous = FULL")
                        guard try Int.fetchOne(db, sql: "PRAGMA synchronous") == 2 else {
                            throw EscrowStoreError(.unavailable, "SQLite refused synchronous=FULL")
                        }
                    }
                    try SQLiteSchema.migrator.migrate(pool)
                    return pool
                }
            } else {
                self.pool = try DatabasePool(path: try Self.readOnlyLocation(path), configuration: config)
                let known = try pool.read { try SQLiteSchema.migrator.hasCompletedMigrations($0) }
                if !known {
                    throw EscrowStoreError(.schema, "the store at \(path) has an unknown or incomplete schema")
                }
            }
        } catch let error as EscrowStoreError {
            throw error
        } catch {
            throw EscrowStoreError(.unavailable, "cannot open the store at \(path) (\(Self.describe(error)))")
        }
        self.batcher = CaptureBatcher(
            writer: .blocking(label: "profile-escrow.capture-commit") { [pool] batch in
                Self.writeBatch(batch, pool: pool, lock: lock) { items, transaction in
                    try await StoreEngine.captureQueueingCodes(items, in: transaction)
                }
            }
        )
        self.committer = CommitBatcher(
            writer: .blocking(label: "profile-escrow.outcome-commit") { [pool] batch in
                Self.writeBatch(batch, pool: pool, lock: lock) { items, transaction in
                    try await StoreEngine.commit(items, in: transaction)
                }
            }
        )
        self.signInCommitter = SignInBatcher(
            bound: .milliseconds(Int64(max(0, configuration.signInWriteLockTimeout) * 1000)),
            writer: .blockingUntil(label: "profile-escrow.signin-commit") { [pool] batch, deadline in
                // Not behind a write of this process that is itself waiting for another process's lock: give up first.
                if let lock, !lock.waitUntilFree(before: deadline) {
                    let busy = EscrowStoreError(.busy, "the store's write lock stayed held past this write's bound")
                    return batch.map { _ in .failure(busy) }
                }
                return Self.writeBatch(batch, pool: pool, lock: lock, deadline: deadline) { items, transaction in
                    try await StoreEngine.completeSignIns(items, in: transaction)
                }
            }
        )

        self.attemptCommitter = GroupCommit(
            writer: .blocking(label: "profile-escrow.attempt-commit") { [pool] batch in
                Self.writeBatch(batch, pool: pool, lock: lock, durable: false) { attempts, transaction in
                    try attempts.map { try transaction.insertSignInAttempt($0) }
                }
            }
        )

        logger.info(
            "opened SQLite store",
            metadata: ["path": "\(path)", "sqlite.version": "\(Self.versionString(version))", "mode": "\(mode)"]
        )
    }

    /// Empties the WAL into the database file (under the write lock, as every checkpoint), then closes the
    /// database's connections. No connection checkpoints by itself when it closes; releasing a writable store
    /// without calling this checkpoints the same way. A process killed before either leaves its last
    /// transactions in the `-wal` file, where any later open reads them.
    public func close() throws {
        checkpointOnce()
        try pool.close()
    }

    deinit {
        checkpointOnce()
    }

    /// Closes the connections without the store's checkpoint, as a killed process leaves them (for tests).
    func closeConnectionsOnly() throws {
        closed.withLockedValue { $0 = true }
        try pool.close()
    }

    private func checkpointOnce() {
        guard let writeLock,
            !closed.withLockedValue({ closed in
                defer { closed = true }
                return closed
            })
        else { return }
        _ = try? pool.writeWithoutTransaction { db in try writeLock.withLock { try db.checkpoint(.truncate) } }
    }

    /// Where a read-only store opens `path`. In a folder it cannot write, SQLite cannot create the `-wal` and
    /// `-shm` files a WAL database needs; when they are missing and no WAL content can be missed (no `-wal`,
    /// or an empty one), the file opens as immutable. A non-empty `-wal` without its `-shm` in a read-only
    /// folder holds transactions the main file lacks: refused, with the reason.
    static func readOnlyLocation(_ path: String) throws -> String {
        let directory = (path as NSString).deletingLastPathComponent
        let folderWritable = access(directory.isEmpty ? "." : directory, W_OK) == 0
        let files = FileManager.default
        let walSize = (try? files.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? nil
        let hasShm = files.fileExists(atPath: path + "-shm")
        guard !folderWritable, walSize == nil || !hasShm else { return path }
        if let walSize, walSize > 0 {
            throw EscrowStoreError(
                .unavailable,
                "the store at \(path) has a write-ahead log but no -shm file, in a folder that cannot be written: "
                    + "copy the folder somewhere writable, or run a checkpoint where it was written"
            )
        }
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "?#%")
        let absolute = (path as NSString).isAbsolutePath ? path : files.currentDirectoryPath + "/" + path
        return "file:\(absolute.addingPercentEncoding(withAllowedCharacters: allowed) ?? absolute)?immutable=1"
    }

    static func libraryVersion() -> Int {
        let text = try? DatabaseQueue().read { try String.fetchOne($0, sql: "SELECT sqlite_version()") }
        return parseVersion(text ?? nil)
    }

    static func parseVersion(_ text: String?) -> Int {
        let parts = (text ?? "0.0.0").split(separator: ".").compactMap { Int($0) } + [0, 0, 0]
        return parts[0] * 1_000_000 + parts[1] * 1_000 + parts[2]
    }

    static func versionString(_ number: Int) -> String {
        "\(number / 1_000_000).\(number / 1_000 % 1_000).\(number % 1_000)"
    }

    /// GRDB errors carry no SQL arguments by default; keep only the SQLite result code and message.
    static func describe(_ error: any Error) -> String {
        if let error = error as? DatabaseError {
            return "SQLite error \(error.resultCode.rawValue): \(error.message ?? "")"
        }
        return "\(type(of: error))"
    }

    /// Our own errors pass through; a malformed row is `malformed_row`; a disk error (``DiskFailure``) is
    /// `unavailable`, its outcome unknown; SQLite's busy timeout (another process kept the database locked) is
    /// `busy`, nothing written; anything else (GRDB, SQLite) becomes a PII-free `failed`.
    static func storeError(_ error: any Error, _ what: String) -> EscrowStoreError {
        if let error = error as? EscrowStoreError { return error }
        if DiskFailure.isFullDisk(error) {
            return EscrowStoreError(
                .unavailable,
                "\(what): the disk is full (\(describe(error))); nothing was stored (the transaction was rolled back): "
                    + "retry once there is space"
            )
        }
        if DiskFailure.isDiskError(error) {
            return EscrowStoreError(
                .unavailable,
                "\(what) with a disk error (\(describe(error))): whether it is on disk is unknown, and the store "
                    + "takes no more writes until a restart"
            )
        }
        if let error = error as? DatabaseError, error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED {
            return EscrowStoreError(
                .busy,
                "\(what): another connection held the database past the busy timeout (\(describe(error)))"
            )
        }
        if let error = error as? MalformedRow {
            return EscrowStoreError(
                .malformedRow,
                "a stored escrow row is malformed (column \(error.column)); the replay worker moves it to dead"
            )
        }
        return EscrowStoreError(.failed, "\(what) (\(describe(error)))")
    }
}
