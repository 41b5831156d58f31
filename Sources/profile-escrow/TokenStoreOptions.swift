import ArgumentParser
import EscrowCore
import EscrowSQLite
import Foundation

/// `--tokens`: where the HTTP API's bearer tokens live. Beside a SQLite store, a file of their own, apart from the
/// database so that `tokens add` and `tokens revoke` work while `serve` runs; with a PostgreSQL store, the same
/// database (every node sees a change at its next request), and `--tokens` is refused. For `serve` and `tokens`.
struct TokenStoreOptions: ParsableArguments {
    static let defaultFileName = "tokens.sqlite"

    @Option(
        name: .customLong("tokens"),
        help: """
            Token file beside a SQLite store (env PROFILE_ESCROW_TOKENS; default tokens.sqlite beside the database \
            file). With a postgres:// database, tokens live in that database.
            """
    )
    var tokens: String?

    /// An open token store, and where it is (for the startup log).
    struct Opened: Sendable {
        let store: any AccessTokenStore
        let place: String
        let close: @Sendable () async throws -> Void
    }

    /// The explicit path, else `tokens.sqlite` in the database file's directory (SQLite stores only).
    func path(_ options: GlobalOptions) -> String {
        if let path = tokens ?? options.environment["PROFILE_ESCROW_TOKENS"] { return path }
        let directory = (options.databasePath as NSString).deletingLastPathComponent
        return directory.isEmpty ? Self.defaultFileName : directory + "/" + Self.defaultFileName
    }

    /// Whether there can be tokens to list without creating anything.
    func exists(_ options: GlobalOptions) -> Bool {
        guard case .sqlite = options.location else { return true }
        return FileManager.default.fileExists(atPath: path(options))
    }

    /// Opens the tokens: the PostgreSQL store's own (`opened`, when the caller has the store open already), or the
    /// token file, created when missing; never the SQLite database file.
    func open(_ options: GlobalOptions, beside opened: StoreLocation.Opened? = nil) async throws -> Opened {
        if case .postgres = options.location {
            if tokens != nil {
                throw ValidationError("--tokens: with a postgres:// database, tokens live in that database")
            }
            if let opened, let tokens = opened.tokens {
                return Opened(store: tokens, place: "the database", close: {})
            }
            let store = try await options.location.open(readOnly: false, logger: options.logger)
            guard let tokens = store.tokens else { throw ValidationError("this store holds no tokens") }
            return Opened(store: tokens, place: "the database", close: store.close)
        }
        let path = path(options)
        guard Self.canonical(path) != Self.canonical(options.databasePath) else {
            throw ValidationError("--tokens: the token file must not be the database file")
        }
        let store = try SQLiteTokenStore(path: path, logger: options.logger)
        return Opened(store: store, place: path, close: { try store.close() })
    }

    private static func canonical(_ path: String) -> String {
        URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
    }
}
