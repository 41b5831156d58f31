import ArgumentParser
import EscrowCore
import EscrowCrypto
import EscrowCustody
import EscrowPostgres
import Foundation
import Logging
import ProfileEscrow

/// `--database`, `--keyring`, `--retention`, each also from its environment variable.
struct GlobalOptions: ParsableArguments {
    static let defaultDirectory = "escrow-data"
    static let defaultDatabase = "\(defaultDirectory)/escrow.sqlite"
    static let defaultKeyring = "\(defaultDirectory)/keyring"

    @Option(
        help: """
            SQLite file path, or a postgres:// URL (env PROFILE_ESCROW_DATABASE; default ./escrow-data/escrow.sqlite).
            """
    )
    var database: String?

    @Option(help: "Keyring file (env PROFILE_ESCROW_KEYRING; default ./escrow-data/keyring).")
    var keyring: String?

    @Option(
        help: """
            Retention from capture, e.g. 30d (env PROFILE_ESCROW_RETENTION; default \
            \(DefaultText.duration(EscrowConfiguration.default.retention))).
            """
    )
    var retention: String?

    @Option(
        help: """
            Seconds any PostgreSQL operation may take before it fails as store_unavailable, waiting for a connection \
            included (env PROFILE_ESCROW_STORE_TIMEOUT; default \
            \(DefaultText.number(PostgresEscrowStore.Configuration().operationTimeout))).
            """
    )
    var storeTimeout: Double?

    @Flag(name: .shortAndLong, help: "Log everything, debug included: the same as --log-level debug.")
    var verbose = false

    @Option(
        help: """
            The least severe level logged (env PROFILE_ESCROW_LOG_LEVEL; default info for serve and replay, \
            warning for the others).
            """
    )
    var logLevel: LogLevelOption?

    @Option(
        help: """
            One JSON object a line, or text (env PROFILE_ESCROW_LOG_FORMAT; default json for serve and replay, \
            text for the others).
            """
    )
    var logFormat: LogFormat?

    var environment: [String: String] { OptionEnvironment.process.values }

    var databasePath: String { database ?? environment["PROFILE_ESCROW_DATABASE"] ?? Self.defaultDatabase }

    /// The SQLite file or PostgreSQL database `--database` names.
    var location: StoreLocation {
        StoreLocation(
            databasePath,
            operationTimeout: try? OptionEnvironment.process.value(storeTimeout, "store-timeout")
        )
    }

    var keyringPath: String { keyring ?? environment["PROFILE_ESCROW_KEYRING"] ?? Self.defaultKeyring }

    /// Whether the keyring is the development default (created on first use when missing).
    var keyringIsDefault: Bool { keyring == nil && environment["PROFILE_ESCROW_KEYRING"] == nil }

    func validate() throws {
        _ = try OptionEnvironment.process.value(logLevel, "log-level")
        _ = try OptionEnvironment.process.value(logFormat, "log-format")
        if let text = retention ?? environment["PROFILE_ESCROW_RETENTION"] {
            guard let seconds = DurationParser.seconds(text), seconds > 0 else {
                let source = retention == nil ? "PROFILE_ESCROW_RETENTION" : "--retention"
                throw ValidationError("\(source): '\(text)' is not a duration such as 12h, 30d")
            }
        }
        if let seconds = try OptionEnvironment.process.value(storeTimeout, "store-timeout"),
            !(seconds > 0 && seconds <= 3_600)
        {
            let source = storeTimeout == nil ? "PROFILE_ESCROW_STORE_TIMEOUT" : "--store-timeout"
            throw ValidationError("\(source): '\(seconds)' must be a number of seconds above 0, at most 3600")
        }
        if case .postgres(let url, _) = location {
            do {
                _ = try PostgresURL(url)
            } catch let error as EscrowStoreError {
                throw ValidationError("--database: \(error.message)")
            }
        }
    }

    /// The logger of a one-shot command: text at `warning` unless told otherwise.
    var logger: Logger { logger(label: "profile-escrow", longRunning: false) }

    /// A logger writing to standard error. `-v` means `debug` everywhere; else `--log-level`, else
    /// `PROFILE_ESCROW_LOG_LEVEL`, else `info` for a long-running command (`serve`, `replay`) and `warning` for the
    /// others. The format: `--log-format`, else `PROFILE_ESCROW_LOG_FORMAT`, else JSON when long-running. (Both
    /// variables are checked in ``validate()``.)
    func logger(label: String, longRunning: Bool) -> Logger {
        let environment = OptionEnvironment.process
        let level =
            verbose
            ? .debug : ((try? environment.value(logLevel, "log-level"))?.level ?? (longRunning ? .info : .warning))
        let format = (try? environment.value(logFormat, "log-format")) ?? (longRunning ? .json : .text)
        return Logger(label: label) { label in LogOutput(label: label, format: format, level: level) }
    }

    var escrowConfiguration: EscrowConfiguration {
        var configuration = EscrowConfiguration()
        if let text = retention ?? environment["PROFILE_ESCROW_RETENTION"], let seconds = DurationParser.seconds(text) {
            configuration.retention = seconds
        }
        return configuration
    }

    /// Loads the keyring (a keyring in custody is unwrapped through its engine: a failure exits 4, naming the engine
    /// and the cause; with `unwrap` false it stays wrapped, for work that needs only the public keys, and needs no
    /// engine). The development default is created on first use, with a warning.
    func loadKeyring(createIfDefault: Bool = true, unwrap: Bool = true) async throws -> Keyring {
        if createIfDefault, keyringIsDefault, !FileManager.default.fileExists(atPath: keyringPath) {
            let keyring = Keyring.generate()
            try keyring.write(path: keyringPath, overwrite: false)
            FileHandle.standardError.write(
                Data(
                    ("note: created a development keyring at \(keyringPath) (mode 0600). For production, create one "
                        + "with `profile-escrow keys init --keyring PATH` and keep a backup of it offline.\n").utf8
                )
            )
            return keyring
        }
        return unwrap ? try await KeyringCustody.load(path: keyringPath) : try Keyring.load(path: keyringPath)
    }

    /// The keyring of `serve`: unwrapped when its custody engine answers; else still wrapped, with the engine's
    /// failure (capture goes on, nothing opens until the ``KeyringReloader`` unwraps it). Never created here.
    func loadServiceKeyring() async throws -> (keyring: Keyring, unwrapFailure: CryptoError?) {
        let loaded = try await KeyringCustody.loadForService(path: keyringPath)
        return (loaded.keyring, loaded.unwrapFailure)
    }

    func openStore(readOnly: Bool = false, owner: String) async throws -> any EscrowStore {
        try await location.open(readOnly: readOnly, logger: logger).store
    }

    /// The escrow over the store and the keyring. `opensEscrows` false: the command never opens an escrow (capture,
    /// and the read-only commands, which show metadata only), so a keyring in custody is not unwrapped and its
    /// engine is not needed.
    func openEscrow(
        readOnly: Bool = false,
        owner: String,
        createKeyring: Bool? = nil,
        opensEscrows: Bool = true
    ) async throws -> Escrow {
        let keyring = try await loadKeyring(
            createIfDefault: createKeyring ?? !readOnly,
            unwrap: opensEscrows && !readOnly
        )
        let opened = try await location.open(readOnly: readOnly, logger: logger)
        return Escrow(
            store: opened.store,
            signIns: opened.signIns,
            notifications: opened.notifications,
            keyring: keyring,
            configuration: escrowConfiguration,
            logger: logger
        )
    }
}

/// Where progress goes: a line rewritten in place on a terminal, nothing otherwise.
struct Progress: Sendable {
    let label: String
    let isTerminal = isatty(STDERR_FILENO) == 1

    func update(_ count: Int) {
        guard isTerminal else { return }
        FileHandle.standardError.write(Data("\r\(label): \(count)".utf8))
    }

    func finish() {
        if isTerminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }
}

/// Checks a user identifier's syntax before it goes anywhere (``UserIdentifier``): exit 2, value not echoed.
func validateUserIdentifier(_ value: String) throws {
    do {
        try UserIdentifier.validate(value)
    } catch {
        throw ValidationError(error.message)
    }
}
