import ArgumentParser
import EscrowCore
import EscrowCrypto
import EscrowHTTP
import Foundation
import Logging
import Metrics
import ProfileEscrow
import Prometheus

/// `profile-escrow serve`: the HTTP API, with the in-process replay worker.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the HTTP API (and the replay worker) until SIGTERM or SIGINT."
    )
    @OptionGroup var options: GlobalOptions
    @OptionGroup var tokenStore: TokenStoreOptions
    @Option(help: "Address to bind (env PROFILE_ESCROW_HOST; default 127.0.0.1; 0.0.0.0 in a container).")
    var host: String?
    @Option(help: "Port to bind (env PROFILE_ESCROW_PORT; default 8080).") var port: Int?
    @Flag(
        name: .customLong("no-worker"),
        help: "Do not run the replay worker in this process (env PROFILE_ESCROW_NO_WORKER=true)."
    )
    var noWorkerFlag = false
    @Flag(
        name: .customLong("no-console"),
        help: "Do not answer the operator console at /console/ (env PROFILE_ESCROW_NO_CONSOLE=true)."
    )
    var noConsoleFlag = false
    @OptionGroup(title: "Replay worker") var worker: WorkerOptions
    @Option(
        name: .customLong("rate-limit"),
        help: "Requests per second per token (env PROFILE_ESCROW_RATE_LIMIT; default 100)."
    )
    var rateLimit: Double?
    @Option(name: .customLong("rate-burst"), help: "Burst per token (env PROFILE_ESCROW_RATE_BURST; default 200).")
    var rateBurst: Double?
    @Flag(
        name: .customLong("metrics-token"),
        help: "Require a token with the metrics scope for /metrics (env PROFILE_ESCROW_METRICS_TOKEN=true)."
    )
    var metricsTokenFlag = false
    @Option(
        name: .customLong("apple-audience"),
        help: "Apple client ids, comma-separated (env PROFILE_ESCROW_APPLE_AUDIENCE)."
    )
    var appleAudience: String?
    @Option(
        help: """
            How long /readyz answers 503 after SIGTERM before the server stops taking requests \
            (env PROFILE_ESCROW_DRAIN_DELAY; default 0s).
            """
    )
    var drainDelay: String?
    @Option(name: .customLong("apple-jwks"), help: "Apple JWKS file (env PROFILE_ESCROW_APPLE_JWKS).")
    var appleJWKS: String?
    @OptionGroup(title: "Web sign-in") var signIn: SignInOptions

    // MARK: Options with their environment variables (``OptionEnvironment``), all checked in `validate()`.

    var environment: OptionEnvironment { .process }
    var audiences: Set<String> {
        let text = (try? environment.value(appleAudience, "apple-audience")) ?? ""
        return Set(text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
    }
    var jwksPath: String? { try? environment.value(appleJWKS, "apple-jwks") }
    var hostValue: String { (try? environment.value(host, "host")) ?? "127.0.0.1" }
    var portValue: Int { (try? environment.value(port, "port")) ?? 8080 }
    var noWorker: Bool { (try? environment.flag(noWorkerFlag, "no-worker")) ?? false }
    var noConsole: Bool { (try? environment.flag(noConsoleFlag, "no-console")) ?? false }
    var metricsToken: Bool { (try? environment.flag(metricsTokenFlag, "metrics-token")) ?? true }
    var rateLimitValue: Double { (try? environment.value(rateLimit, "rate-limit")) ?? 100 }
    var rateBurstValue: Double { (try? environment.value(rateBurst, "rate-burst")) ?? 200 }
    var drainDelaySeconds: Double {
        drainDelay == nil && environment.text("drain-delay") == nil
            ? 0 : (try? WorkerOptions.duration(drainDelay, "drain-delay", default: "0s", environment)) ?? 0
    }

    func validate() throws {
        _ = try environment.value(host, "host")
        _ = try environment.value(port, "port")
        _ = try environment.flag(noWorkerFlag, "no-worker")
        _ = try environment.flag(noConsoleFlag, "no-console")
        _ = try environment.flag(metricsTokenFlag, "metrics-token")
        _ = try environment.value(rateLimit, "rate-limit")
        _ = try environment.value(rateBurst, "rate-burst")
        if drainDelay != nil || environment.text("drain-delay") != nil {
            _ = try WorkerOptions.duration(drainDelay, "drain-delay", default: "0s", environment)
        }
        guard (0...65535).contains(portValue) else { throw ValidationError("--port: must be 0-65535") }
        if audiences.isEmpty != (jwksPath == nil) {
            throw ValidationError(
                "verified capture needs both PROFILE_ESCROW_APPLE_AUDIENCE and PROFILE_ESCROW_APPLE_JWKS (or neither)"
            )
        }
        if try signIn.configuration(environment) != nil, jwksPath == nil {
            throw ValidationError(
                "web sign-in verifies Apple's id_token: it needs --apple-audience and --apple-jwks too"
            )
        }
        for (name, value) in [("rate-limit", rateLimitValue), ("rate-burst", rateBurstValue)]
        where !(value > 0 && value.isFinite) {
            throw ValidationError("--\(name) (or its environment variable) must be a positive number")
        }
        _ = try worker.escrowConfiguration(options)
        if !noWorker {
            do {
                _ = try worker.workerConfiguration()
            } catch let error as ValidationError {
                throw ValidationError(
                    "\(error.message)\n(serve runs the replay worker; pass --no-worker to run the HTTP API alone)"
                )
            }
        }
    }

    func run() async throws {
        let logger = options.logger(label: "profile-escrow.serve", longRunning: true)
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(EscrowPrometheus.factory(registry: registry))

        // Never create a development keyring here: a service that silently sealed to a new keyring
        // would leave every escrow sealed to the real one unopenable.
        let keyring = try await options.loadKeyring(createIfDefault: false)
        // Purges are flushed from the WAL in batches by the server's PurgeFlusher, not one checkpoint each.
        let opened = try await options.location.open(readOnly: false, batchedPurges: true, logger: logger)
        // Bearer tokens are looked up at every request: `tokens add` and `tokens revoke` change them beside this process
        // (their own rollback-journal file, or the PostgreSQL database) and take effect at the next request (a SQLite
        // token file's lookups are kept only while its change counter stays the same).
        let tokens = try await tokenStore.open(options, beside: opened)
        let escrow = Escrow(
            store: opened.store,
            keyring: keyring,
            configuration: try worker.escrowConfiguration(options),
            logger: logger
        )
        // The start's unwrap succeeded (it would have exited 4): the custody gauge says so.
        if keyring.custody != nil { escrow.custodyHealth.succeeded() }
        logger.notice(
            "starting profile-escrow serve",
            metadata: opened.metadata.merging(
                [
                    "keyring":
                        "\(keyring.isPublicOnly ? "public-only (capture-only node: replay answers 409)" : "full")",
                    "address": "\(hostValue):\(portValue)",
                    "tokens.path": "\(tokens.place)",
                ],
                uniquingKeysWith: { $1 }
            )
        )

        var configuration = EscrowHTTPConfiguration()
        configuration.host = hostValue
        configuration.port = portValue
        configuration.rateLimit = RateLimit(requestsPerSecond: rateLimitValue, burst: rateBurstValue)
        configuration.metricsRequireToken = metricsToken
        configuration.drainDelay = .milliseconds(Int64(drainDelaySeconds * 1000))
        configuration.console = !noConsole
        if let jwksPath {
            configuration.apple = try await AppleVerifier.load(jwksPath: jwksPath, audiences: audiences)
            logger.notice("verified capture on: identity tokens are required", metadata: ["apple.jwks": "\(jwksPath)"])
        }
        configuration.signIn = try signIn.configuration(environment)
        if let signIn = configuration.signIn {
            logger.notice(
                "web sign-in on: /v1/apple/signin",
                metadata: ["signin.returns": "\(signIn.returns.keys.sorted().joined(separator: ","))"]
            )
        }

        if try await tokens.store.tokens().allSatisfy(\.isRevoked) {
            logger.warning(
                "no active bearer token: every API request will answer 401 until `profile-escrow tokens add`",
                metadata: ["tokens.path": "\(tokens.place)"]
            )
        }

        var workerConfiguration: ReplayWorker.Configuration?
        if !noWorker { workerConfiguration = try worker.workerConfiguration() }
        let server = EscrowServer(
            escrow: escrow,
            tokens: tokens.store,
            notifications: opened.notifications,
            signIns: opened.signIns,
            registry: registry,
            configuration: configuration,
            worker: workerConfiguration,
            keyringPath: options.keyringPath,
            logger: logger
        )
        try await server.run()
        try await tokens.close()
        try await opened.close()
        logger.notice("stopped")
    }

    static func version(_ number: Int) -> String {
        "\(number / 1_000_000).\(number / 1_000 % 1_000).\(number % 1_000)"
    }
}
