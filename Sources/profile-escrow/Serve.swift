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
    @Option(help: "Address to bind.") var host = "127.0.0.1"
    @Option(help: "Port to bind.") var port = 8080
    @Flag(name: .customLong("no-worker"), help: "Do not run the replay worker in this process.") var noWorker = false
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
        help: "Require a token with the metrics scope for /metrics (env PROFILE_ESCROW_METRICS_TOKEN=1)."
    )
    var metricsToken = false
    @Option(
        name: .customLong("apple-audience"),
        help: "Apple client ids, comma-separated (env PROFILE_ESCROW_APPLE_AUDIENCE)."
    )
    var appleAudience: String?
    @Option(name: .customLong("apple-jwks"), help: "Apple JWKS file (env PROFILE_ESCROW_APPLE_JWKS).")
    var appleJWKS: String?

    var environment: [String: String] { ProcessInfo.processInfo.environment }
    var audiences: Set<String> {
        let text = appleAudience ?? environment["PROFILE_ESCROW_APPLE_AUDIENCE"] ?? ""
        return Set(text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
    }
    var jwksPath: String? { appleJWKS ?? environment["PROFILE_ESCROW_APPLE_JWKS"] }
    /// Unparsable environment values become NaN, which `validate()` refuses.
    var rateLimitValue: Double {
        rateLimit ?? environment["PROFILE_ESCROW_RATE_LIMIT"].map { Double($0) ?? .nan } ?? 100
    }
    var rateBurstValue: Double {
        rateBurst ?? environment["PROFILE_ESCROW_RATE_BURST"].map { Double($0) ?? .nan } ?? 200
    }

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port: must be 0-65535") }
        if audiences.isEmpty != (jwksPath == nil) {
            throw ValidationError(
                "verified capture needs both PROFILE_ESCROW_APPLE_AUDIENCE and PROFILE_ESCROW_APPLE_JWKS (or neither)"
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
        var logger = Logger(label: "profile-escrow.serve")
        logger.logLevel = options.verbose ? .debug : .info
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))

        // Never create a development keyring here: a service that silently sealed to a new keyring
        // would leave every escrow sealed to the real one unopenable.
        let keyring = try options.loadKeyring(createIfDefault: false)
        // Purges are flushed from the WAL in batches by the server's PurgeFlusher, not one checkpoint each.
        let opened = try await options.location.open(readOnly: false, batchedPurges: true, logger: logger)
        // Bearer tokens are looked up at every request (no cache): `tokens add` and `tokens revoke` change them
        // beside this process (their own rollback-journal file, or the PostgreSQL database) and take effect at once.
        let tokens = try await tokenStore.open(options, beside: opened)
        let escrow = Escrow(
            store: opened.store,
            keyring: keyring,
            configuration: try worker.escrowConfiguration(options),
            logger: logger
        )
        logger.notice(
            "starting profile-escrow serve",
            metadata: opened.metadata.merging(
                [
                    "keyring":
                        "\(keyring.isPublicOnly ? "public-only (capture-only node: replay answers 409)" : "full")",
                    "address": "\(host):\(port)",
                    "tokens.path": "\(tokens.place)",
                ],
                uniquingKeysWith: { $1 }
            )
        )

        var configuration = EscrowHTTPConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.rateLimit = RateLimit(requestsPerSecond: rateLimitValue, burst: rateBurstValue)
        configuration.metricsRequireToken = metricsToken || environment["PROFILE_ESCROW_METRICS_TOKEN"] == "1"
        if let jwksPath {
            configuration.apple = try await AppleVerifier.load(jwksPath: jwksPath, audiences: audiences)
            logger.notice("verified capture on: identity tokens are required", metadata: ["apple.jwks": "\(jwksPath)"])
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
