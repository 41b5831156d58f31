public import EscrowCore
import EscrowCrypto
import Foundation
import GRDB
public import Logging

/// The embedded default store: one SQLite file through GRDB (SPEC §5).
///
/// WAL mode, `synchronous=FULL` (a capture returns only once its commit is on disk),
/// `secure_delete=ON`, foreign keys on. Purges are followed by a `wal_checkpoint(TRUNCATE)` so no
/// copy of a purged ciphertext survives in the `-wal` file.
///
/// SQLite before 3.51.3 can corrupt a WAL database when two connections write or checkpoint at
/// once, so on such a version a writable store takes the file's single writer slot (``WriterLock``):
/// a second writing process gets ``EscrowStoreError/Code/writerLocked``; read-only stores always open.
public final class SQLiteEscrowStore: EscrowStore {
    public struct Configuration: Sendable {
        /// Open without writing anything: for `status` and `purge-report` beside a running writer.
        public var readOnly: Bool = false
        /// Checkpoint (TRUNCATE) after every purge. A busy service turns this off and calls
        /// ``flushPurged()`` every few seconds instead (batched).
        public var checkpointAfterPurge: Bool = true
        /// Who holds the writer slot, for the error a second writer gets (e.g. "profile-escrow serve").
        public var ownerDescription: String = "profile-escrow"
        /// How long a statement waits for a lock held by another connection.
        public var busyTimeout: Double = 5

        public init() {}
    }

    /// The first SQLite version with the WAL-reset fix (3.51.3).
    public static let walResetFixedVersion = 3_051_003

    public let path: String
    public let configuration: Configuration
    /// `sqlite_version()` as a number, e.g. 3040001.
    public let sqliteVersion: Int
    /// Whether this store holds the single writer slot (false when read-only or on a fixed SQLite).
    public let holdsWriterSlot: Bool

    let pool: DatabasePool
    let batcher: CaptureBatcher
    private let writerLock: WriterLock?

    public init(path: String, configuration: Configuration = Configuration(), logger: Logger) throws {
        self.path = path
        self.configuration = configuration
        if !configuration.readOnly { try StoreFiles.createParentDirectory(of: path) }
        if configuration.readOnly, !FileManager.default.fileExists(atPath: path) {
            throw EscrowStoreError(.unavailable, "no store at \(path)")
        }

        let version = Self.libraryVersion()
        self.sqliteVersion = version
        let needsSingleWriter = version < Self.walResetFixedVersion
        if !configuration.readOnly && needsSingleWriter {
            self.writerLock = try WriterLock(databasePath: path, owner: configuration.ownerDescription)
            self.holdsWriterSlot = true
        } else {
            self.writerLock = nil
            self.holdsWriterSlot = false
        }

        var config = GRDB.Configuration()
        config.readonly = configuration.readOnly
        config.busyMode = .timeout(configuration.busyTimeout)
        config.label = "escrow"
        config.prepareDatabase { db in
            if !db.configuration.readonly {
                try db.execute(sql: "PRAGMA secure_delete = ON")
                try db.execute(sql: "PRAGMA synchronous = FULL")
            }
            try db.execute(sql: "PRAGMA foreign_keys = ON")
        }
        do {
            self.pool = try DatabasePool(path: path, configuration: config)
            if !configuration.readOnly {
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
            } else {
                let known = try pool.read { try SQLiteSchema.migrator.hasCompletedMigrations($0) }
                if !known {
                    throw EscrowStoreError(.schema, "the store at \(path) has an unknown or incomplete schema")
                }
            }
            self.batcher = CaptureBatcher { [pool] batch in Self.writeCaptures(batch, pool: pool) }
        } catch let error as EscrowStoreError {
            throw error
        } catch {
            throw EscrowStoreError(.unavailable, "cannot open the store at \(path) (\(Self.describe(error)))")
        }

        let mode =
            configuration.readOnly
            ? "read-only" : needsSingleWriter ? "single writer (SQLite < 3.51.3 WAL-reset bug)" : "multi-writer"
        logger.info(
            "opened SQLite store",
            metadata: [
                "path": "\(path)", "sqlite.version": "\(Self.versionString(version))", "mode": "\(mode)",
            ]
        )
    }

    /// Closes the database and gives the writer slot back (only once the pool is closed: a pool that
    /// refuses to close could still write).
    public func close() throws {
        try pool.close()
        writerLock?.release()
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
}
