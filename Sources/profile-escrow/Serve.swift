import ArgumentParser
import EscrowHTTP
import Logging
import Metrics
import ProfileEscrow
import Prometheus

/// `profile-escrow serve`: the HTTP API, with the in-process replay worker. Maps its options to an
/// ``EscrowServer/Configuration`` and runs ``EscrowServer``, which builds, starts and shuts down every service.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the HTTP API (and the replay worker) until SIGTERM or SIGINT."
    )
    @OptionGroup var options: GlobalOptions
    @OptionGroup var tokenStore: TokenStoreOptions
    @OptionGroup(title: "Listeners") var listeners: ListenerOptions
    @Flag(
        name: .customLong("no-worker"),
        help: "Do not run the replay worker in this process (env PROFILE_ESCROW_NO_WORKER=true)."
    )
    var noWorker = false
    @OptionGroup(title: "Replay worker") var worker: WorkerOptions
    @OptionGroup var scheduler: SchedulingOptions
    @OptionGroup(title: "Rate limits") var limits: RateLimitOptions
    @OptionGroup(title: "Apple") var apple: AppleOptions
    @OptionGroup(title: "Apple tokens") var appleTokens: AppleTokenOptions
    @OptionGroup(title: "TLS") var tls: TLSOptions
    @OptionGroup(title: "Web sign-in") var signIn: SignInOptions

    func validate() throws {
        // The TLS pair is read here only (the server reads it once more to serve it), not at each configuration().
        try tls.check(try configuration().tls)
    }

    /// Every option read once (the command line, else its `PROFILE_ESCROW_…` variable, else the library's default)
    /// and checked, a problem being a usage error (exit 2): `validate()` and `run()` both build this, so the values
    /// validated are the values served.
    func configuration(_ environment: OptionEnvironment = .process) throws -> EscrowServer.Configuration {
        try OpenTelemetryTraces.validate(options.environment)
        var configuration = EscrowServer.Configuration()
        try listeners.apply(to: &configuration.http, environment)
        try limits.apply(to: &configuration.http, environment)
        let apple = try apple.keys(environment)
        configuration.apple = apple
        configuration.forwarding = try self.apple.forwarding(environment, apple: apple, signedBy: worker)
        configuration.tls = try tls.files(environment)
        if let signIn = try signIn.configuration(environment) {
            if configuration.tls?.clientCAPath != nil, configuration.http.publicPort == nil {
                throw ValidationError(
                    "--tls-client-ca asks every client of --port for a certificate: put web sign-in on --public-port"
                )
            }
            guard let audiences = apple?.audiences else {
                throw ValidationError(
                    """
                    web sign-in verifies Apple's id_token: it needs --apple-audience too (with the keys from \
                    --apple-jwks-url, default Apple's, or an --apple-jwks file)
                    """
                )
            }
            guard audiences.contains(signIn.clientID) else {
                throw ValidationError("--signin-client-id must also be one of the --apple-audience values")
            }
            configuration.http.signIn = signIn
        }
        configuration.escrow = try worker.escrowConfiguration(options, environment)
        if try !environment.flag(noWorker, "no-worker") {
            do {
                configuration.worker = try worker.workerConfiguration(environment)
            } catch let error as ValidationError {
                throw ValidationError(
                    "\(error.message)\n(serve runs the replay worker; pass --no-worker to run the HTTP API alone)"
                )
            }
        }
        configuration.keyringPath = options.keyringPath
        configuration.appleTokens = try appleTokens.settings(environment, keyringPath: options.keyringPath, apple: apple)
        return configuration
    }

    func run() async throws {
        var configuration = try configuration()
        let logger = options.logger(label: "profile-escrow.serve", longRunning: true)
        try scheduler.apply(logger: logger)
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(EscrowPrometheus.factory(registry: registry))

        // Never create a development keyring here: a service that silently sealed to a new keyring
        // would leave every escrow sealed to the real one unopenable. A keyring in custody whose engine does not
        // answer stays wrapped: capture needs only its public keys; the KeyringReloader unwraps it later.
        let (keyring, unwrapFailure) = try await options.loadServiceKeyring()
        let traces = try OpenTelemetryTraces.make(
            environment: options.environment,
            processName: "serve",
            logger: logger
        )
        configuration.escrow.tracer = traces?.tracer
        let (stores, metadata) = try await openStores(logger: logger)
        try await EscrowServer.run(
            configuration,
            stores: stores,
            keyring: keyring,
            unwrapFailure: unwrapFailure,
            registry: registry,
            telemetry: traces.map { [$0.service] } ?? [],
            metadata: metadata.merging(["traces": "\(traces == nil ? "off" : "on (OTLP/HTTP)")"]) { $1 },
            logger: logger
        )
    }

    /// The escrow store and the tokens, for the server to close; the store closed again when the tokens do not open.
    /// Bearer tokens are looked up at every request: `tokens add` and `tokens revoke` change them beside this process
    /// (their own rollback-journal file, or the PostgreSQL database) and take effect at the next request (a SQLite
    /// token file's lookups are kept only while its change counter stays the same).
    func openStores(logger: Logger) async throws -> (EscrowServer.Stores, Logger.Metadata) {
        // Purges are flushed from the WAL in batches by the server's PurgeFlusher, not one checkpoint each.
        let opened = try await options.location.open(readOnly: false, batchedPurges: true, logger: logger)
        let tokens: TokenStoreOptions.Opened
        do {
            tokens = try await tokenStore.open(options, beside: opened)
        } catch {
            try? await opened.close()
            throw error
        }
        let stores = EscrowServer.Stores(
            escrows: opened.store,
            notifications: opened.notifications,
            signIns: opened.signIns,
            tokens: tokens.store,
            tokensPlace: tokens.place,
            closeTokens: tokens.close,
            closeEscrows: opened.close
        )
        return (stores, opened.metadata)
    }
}
