import ArgumentParser
import EscrowSQLite
import Foundation

/// `--tokens`: the file of the HTTP API's bearer tokens, apart from the database so that `tokens add`
/// and `tokens revoke` work while `serve` runs. For `serve` and `tokens`.
struct TokenStoreOptions: ParsableArguments {
    static let defaultFileName = "tokens.sqlite"

    @Option(
        name: .customLong("tokens"),
        help: "Token file (env PROFILE_ESCROW_TOKENS; default tokens.sqlite beside the database file)."
    )
    var tokens: String?

    /// The explicit path, else `tokens.sqlite` in the database file's directory.
    func path(_ options: GlobalOptions) -> String {
        if let path = tokens ?? options.environment["PROFILE_ESCROW_TOKENS"] { return path }
        let directory = (options.databasePath as NSString).deletingLastPathComponent
        return directory.isEmpty ? Self.defaultFileName : directory + "/" + Self.defaultFileName
    }

    /// Opens (creating when missing) the token file; never the database.
    func open(_ options: GlobalOptions) throws -> SQLiteTokenStore {
        let path = path(options)
        guard Self.canonical(path) != Self.canonical(options.databasePath) else {
            throw ValidationError("--tokens: the token file must not be the database file")
        }
        return try SQLiteTokenStore(path: path, logger: options.logger)
    }

    private static func canonical(_ path: String) -> String {
        URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
    }
}
