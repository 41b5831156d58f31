import EscrowCore
import EscrowPostgres
import EscrowSQLite
import Foundation
import Logging

/// Where the store lives, from `--database`: a SQLite file path, or a `postgres://` / `postgresql://` URL. The only
/// place the CLI knows which kind of store it talks to: commands get the escrow store, its notification log and
/// its token store from ``open(readOnly:batchedPurges:logger:)`` and stay parse, call, print.
enum StoreLocation {
    case sqlite(path: String)
    /// `operationTimeout`: `--store-timeout`, nil for the store's default.
    case postgres(url: String, operationTimeout: Double?)

    init(_ text: String, operationTimeout: Double? = nil) {
        self =
            PostgresURL.isPostgresURL(text)
            ? .postgres(url: text, operationTimeout: operationTimeout) : .sqlite(path: text)
    }

    /// An open store and what lives beside it.
    struct Opened: Sendable {
        let store: any EscrowStore
        let notifications: any NotificationOutbox
        /// Web sign-in attempts, in the same database as the escrows (a callback's capture and its attempt's use are
        /// one transaction).
        let signIns: any SignInStore
        /// The tokens in the same database (PostgreSQL), or nil: beside a SQLite store they live in their own file
        /// (``TokenStoreOptions``).
        let tokens: (any AccessTokenStore)?
        /// What the startup log says about the store (no password).
        let metadata: Logger.Metadata
        let close: @Sendable () async throws -> Void
    }

    /// Opens the store. `batchedPurges`: a long-running command flushes purged bytes every few seconds rather than
    /// after each purge (SQLite's WAL checkpoint; PostgreSQL has nothing to flush).
    func open(readOnly: Bool, batchedPurges: Bool = false, logger: Logger) async throws -> Opened {
        switch self {
        case .sqlite(let path):
            var configuration = SQLiteEscrowStore.Configuration()
            configuration.readOnly = readOnly
            if batchedPurges { configuration.checkpointAfterPurge = false }
            let store = try SQLiteEscrowStore(path: path, configuration: configuration, logger: logger)
            return Opened(
                store: store,
                notifications: store,
                signIns: store,
                tokens: nil,
                metadata: [
                    "sqlite.version": "\(Self.version(store.sqliteVersion))",
                    "sqlite.mode": "\(store.mode)",
                ],
                close: { try store.close() }
            )
        case .postgres(let url, let operationTimeout):
            var configuration = PostgresEscrowStore.Configuration()
            configuration.readOnly = readOnly
            if let operationTimeout { configuration.operationTimeout = operationTimeout }
            let store = try await PostgresEscrowStore.connect(url: url, configuration: configuration, logger: logger)
            return Opened(
                store: store,
                notifications: store,
                signIns: store,
                tokens: store,
                metadata: [
                    "postgres.url": "\(store.url)",
                    "postgres.version": "\(store.serverVersion)",
                    "postgres.synchronous_commit": "\(store.synchronousCommit)",
                    "postgres.mode": "\(store.mode)",
                ],
                close: { await store.close() }
            )
        }
    }

    /// SQLite's version number as text: `3051003` → `3.51.3`.
    static func version(_ number: Int) -> String {
        "\(number / 1_000_000).\(number / 1_000 % 1_000).\(number % 1_000)"
    }
}
