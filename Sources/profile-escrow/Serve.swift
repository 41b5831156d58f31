import ArgumentParser
import AsyncHTTPClient
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
    @Option(
        name: .customLong("public-port"),
        help: """
            A second listener for the browser's and Apple's routes only: web sign-in, /v1/apple/notifications, \
            /healthz; the token-guarded API stays on --port (env PROFILE_ESCROW_PUBLIC_PORT).
            """
    )
    var publicPort: Int?
    @Option(
        name: .customLong("public-host"),
        help: "Address of the --public-port listener (env PROFILE_ESCROW_PUBLIC_HOST; default --host)."
    )
    var publicHost: String?
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
    @OptionGroup var scheduler: SchedulingOptions
    @Option(
        name: .customLong("rate-limit"),
        help: "Requests per second per token (env PROFILE_ESCROW_RATE_LIMIT; default 100)."
    )
    var rateLimit: Double?
    @Option(name: .customLong("rate-burst"), help: "Burst per token (env PROFILE_ESCROW_RATE_BURST; default 200).")
    var rateBurst: Double?
    @Option(
        name: .customLong("anonymous-rate-limit"),
        help: """
            Requests per second per client and route without a token: web sign-in's start and callback, Apple \
            notifications, an open /metrics, the console's sign-in (env PROFILE_ESCROW_ANONYMOUS_RATE_LIMIT; default \
            10; burst twice that). /healthz and /readyz are never limited.
            """
    )
    var anonymousRateLimit: Double?
    @Option(
        name: .customLong("anonymous-overall-rate-limit"),
        help: """
            Requests per second per route without a token, all clients together (env \
            PROFILE_ESCROW_ANONYMOUS_OVERALL_RATE_LIMIT; default 500; burst twice that).
            """
    )
    var anonymousOverallRateLimit: Double?
    @Option(
        name: .customLong("trusted-proxy"),
        help: """
            A proxy (address or CIDR network, repeated or comma-separated) whose X-Forwarded-For tells who the \
            client is, for the per-client limits (env PROFILE_ESCROW_TRUSTED_PROXY; default none).
            """
    )
    var trustedProxy: [String] = []
    @Flag(
        name: .customLong("metrics-token"),
        help: "Require a token with the metrics scope for /metrics (env PROFILE_ESCROW_METRICS_TOKEN=true)."
    )
    var metricsTokenFlag = false
    @Option(
        name: .customLong("apple-audience"),
        help: """
            Apple client ids (bundle ID, Services ID), repeated or comma-separated (env PROFILE_ESCROW_APPLE_AUDIENCE, \
            comma-separated).
            """
    )
    var appleAudience: [String] = []
    @Option(
        help: """
            How long /readyz answers 503 after SIGTERM before the server stops taking requests \
            (env PROFILE_ESCROW_DRAIN_DELAY; default 0s).
            """
    )
    var drainDelay: String?
    @Option(
        name: .customLong("apple-jwks"),
        help: "Apple's keys from this JWKS file instead of the URL (env PROFILE_ESCROW_APPLE_JWKS)."
    )
    var appleJWKS: String?
    @Option(
        name: .customLong("apple-jwks-url"),
        help: """
            Where Apple's keys are fetched, cached per Cache-Control and fetched again on an unknown kid \
            (env PROFILE_ESCROW_APPLE_JWKS_URL; default https://appleid.apple.com/auth/keys).
            """
    )
    var appleJWKSURL: String?
    @Option(
        name: .customLong("forward-notifications"),
        help: """
            Forward verified Apple notifications to this backend URL, signed like deliveries with the webhook secret \
            (env PROFILE_ESCROW_FORWARD_NOTIFICATIONS).
            """
    )
    var forwardNotifications: String?
    @Option(
        name: .customLong("tls-certificate"),
        help: """
            Serve HTTPS on both listeners with this PEM certificate chain, reloaded when it changes \
            (env PROFILE_ESCROW_TLS_CERTIFICATE; with --tls-key).
            """
    )
    var tlsCertificate: String?
    @Option(
        name: .customLong("tls-key"),
        help: "The PEM private key of --tls-certificate (env PROFILE_ESCROW_TLS_KEY)."
    )
    var tlsKey: String?
    @Option(
        name: .customLong("tls-client-ca"),
        help: """
            Clients of --port must present a certificate from this PEM CA (mutual TLS; the --public-port listener \
            never asks) (env PROFILE_ESCROW_TLS_CLIENT_CA).
            """
    )
    var tlsClientCA: String?
    @OptionGroup(title: "Web sign-in") var signIn: SignInOptions

    // MARK: Options with their environment variables (``OptionEnvironment``), all checked in `validate()`.

    var environment: OptionEnvironment { .process }
    var audiences: Set<String> { Set(environment.list(appleAudience, "apple-audience")) }
    var jwksPath: String? { try? environment.value(appleJWKS, "apple-jwks") }
    var jwksURLText: String? { try? environment.value(appleJWKSURL, "apple-jwks-url") }
    var hostValue: String { (try? environment.value(host, "host")) ?? "127.0.0.1" }
    var portValue: Int { (try? environment.value(port, "port")) ?? 8080 }
    var publicPortValue: Int? { try? environment.value(publicPort, "public-port") }
    var publicHostValue: String? { try? environment.value(publicHost, "public-host") }
    var noWorker: Bool { (try? environment.flag(noWorkerFlag, "no-worker")) ?? false }
    var noConsole: Bool { (try? environment.flag(noConsoleFlag, "no-console")) ?? false }
    var metricsToken: Bool { (try? environment.flag(metricsTokenFlag, "metrics-token")) ?? true }
    var rateLimitValue: Double { (try? environment.value(rateLimit, "rate-limit")) ?? 100 }
    var rateBurstValue: Double { (try? environment.value(rateBurst, "rate-burst")) ?? 200 }
    var anonymousRateLimitValue: Double { (try? environment.value(anonymousRateLimit, "anonymous-rate-limit")) ?? 10 }
    var anonymousOverallRateLimitValue: Double {
        (try? environment.value(anonymousOverallRateLimit, "anonymous-overall-rate-limit")) ?? 500
    }
    var trustedProxies: [String] { environment.list(trustedProxy, "trusted-proxy") }
    var drainDelaySeconds: Double {
        drainDelay == nil && environment.text("drain-delay") == nil
            ? 0 : (try? WorkerOptions.duration(drainDelay, "drain-delay", default: "0s", environment)) ?? 0
    }

    /// `--forward-notifications`: the URL, signed with the deliveries' webhook secrets; nil when not asked for.
    func forwarderConfiguration() throws -> NotificationForwarder.Configuration? {
        guard let text = try environment.value(forwardNotifications, "forward-notifications") else { return nil }
        guard let url = URL(string: text), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil
        else { throw ValidationError("--forward-notifications: must be an absolute http(s) URL") }
        guard !audiences.isEmpty else {
            throw ValidationError("--forward-notifications forwards verified notifications: it needs --apple-audience")
        }
        let secrets: [WebhookSecret]
        do {
            secrets = try worker.workerConfiguration(environment).webhookSecrets
        } catch let error as ValidationError {
            throw ValidationError("--forward-notifications signs like deliveries: \(error.message)")
        }
        var forwarding = NotificationForwarder.Configuration(url: url, secrets: secrets)
        forwarding.tls = try worker.backendTLS(environment)
        return forwarding
    }

    /// The TLS files, checked: both or neither, readable, the key the certificate's.
    func tlsFiles() throws -> TLSCertificateFiles? {
        let certificate = try environment.value(tlsCertificate, "tls-certificate")
        let key = try environment.value(tlsKey, "tls-key")
        let clientCA = try environment.value(tlsClientCA, "tls-client-ca")
        guard let certificate, let key else {
            if certificate != nil || key != nil { throw ValidationError("--tls-certificate and --tls-key go together") }
            if clientCA != nil { throw ValidationError("--tls-client-ca needs --tls-certificate and --tls-key") }
            return nil
        }
        if let clientCA, !FileManager.default.isReadableFile(atPath: clientCA) {
            throw ValidationError("--tls-client-ca: cannot read \(clientCA)")
        }
        do {
            return try TLSCertificateFiles(certificatePath: certificate, keyPath: key)
        } catch {
            throw ValidationError("\(error)")
        }
    }

    func validate() throws {
        try OpenTelemetryTraces.validate(options.environment)
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
        if let publicPort = try environment.value(publicPort, "public-port") {
            guard (0...65535).contains(publicPort) else { throw ValidationError("--public-port: must be 0-65535") }
            guard publicPort == 0 || publicPort != portValue else {
                throw ValidationError("--public-port must differ from --port")
            }
        } else if try environment.value(publicHost, "public-host") != nil {
            throw ValidationError("--public-host needs --public-port")
        }
        if audiences.isEmpty, jwksPath != nil || jwksURLText != nil {
            throw ValidationError(
                "--apple-jwks and --apple-jwks-url need --apple-audience (PROFILE_ESCROW_APPLE_AUDIENCE): the client ids"
            )
        }
        if jwksPath != nil, jwksURLText != nil {
            throw ValidationError("give Apple's keys as --apple-jwks (a file) or --apple-jwks-url, not both")
        }
        if let jwksURLText { try SignInOptions.requireWebURL(jwksURLText, "--apple-jwks-url") }
        _ = try forwarderConfiguration()
        if try tlsFiles() != nil, try environment.value(tlsClientCA, "tls-client-ca") != nil, publicPortValue == nil,
            try signIn.configuration(environment) != nil
        {
            throw ValidationError(
                "--tls-client-ca asks every client of --port for a certificate: put web sign-in on --public-port"
            )
        }
        if let signIn = try signIn.configuration(environment) {
            guard !audiences.isEmpty else {
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
        }
        _ = try environment.value(anonymousRateLimit, "anonymous-rate-limit")
        _ = try environment.value(anonymousOverallRateLimit, "anonymous-overall-rate-limit")
        do {
            _ = try TrustedProxies(trustedProxies)
        } catch {
            throw ValidationError("--trusted-proxy (or PROFILE_ESCROW_TRUSTED_PROXY): \(error.description)")
        }
        for (name, value) in [
            ("rate-limit", rateLimitValue), ("rate-burst", rateBurstValue),
            ("anonymous-rate-limit", anonymousRateLimitValue),
            ("anonymous-overall-rate-limit", anonymousOverallRateLimitValue),
        ]
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
        try scheduler.apply(logger: logger)
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(EscrowPrometheus.factory(registry: registry))

        // Never create a development keyring here: a service that silently sealed to a new keyring
        // would leave every escrow sealed to the real one unopenable. A keyring in custody whose engine does not
        // answer stays wrapped: capture needs only its public keys; the KeyringReloader unwraps it later.
        let (keyring, unwrapFailure) = try await options.loadServiceKeyring()
        // Purges are flushed from the WAL in batches by the server's PurgeFlusher, not one checkpoint each.
        let opened = try await options.location.open(readOnly: false, batchedPurges: true, logger: logger)
        // Bearer tokens are looked up at every request: `tokens add` and `tokens revoke` change them beside this process
        // (their own rollback-journal file, or the PostgreSQL database) and take effect at the next request (a SQLite
        // token file's lookups are kept only while its change counter stays the same).
        let tokens = try await tokenStore.open(options, beside: opened)
        // A capture's keys are made ahead on a thread of their own, at idle priority when this process moves its own
        // threads between scheduling policies (`--scheduling batch`, allowed).
        let sealingKeys = SealingKeyReserve(idlePriority: DrainScheduling.isOn)
        sealingKeys.start()
        defer { sealingKeys.stop() }
        let (escrow, traces) = try worker.escrow(
            store: opened.store,
            keyring: keyring,
            options,
            process: "serve",
            sealingKeys: sealingKeys,
            logger: logger
        )
        var keyringMode = "full"
        if let unwrapFailure {
            keyringMode = "full, still wrapped (capture only until the custody engine answers)"
            escrow.custodyHealth.failed(unwrapFailure, keysUnavailable: true)
            logger.error(
                "the custody engine did not unwrap the keyring: this node captures, and opens nothing until it answers",
                metadata: ["error.code": "\(unwrapFailure.code)", "error": "\(unwrapFailure.message)"]
            )
        }
        logger.notice(
            "starting profile-escrow serve",
            metadata: opened.metadata.merging(
                [
                    "keyring":
                        "\(keyring.isPublicOnly ? "public-only (capture-only node: replay answers 409)" : keyringMode)",
                    "address": "\(hostValue):\(portValue)",
                    "public.address": "\(publicPortValue.map { "\(publicHostValue ?? hostValue):\($0)" } ?? "none")",
                    "tokens.path": "\(tokens.place)",
                    "traces": "\(traces == nil ? "off" : "on (OTLP/HTTP)")",
                ],
                uniquingKeysWith: { $1 }
            )
        )

        var configuration = EscrowHTTPConfiguration()
        configuration.host = hostValue
        configuration.port = portValue
        configuration.publicPort = publicPortValue
        configuration.publicHost = publicHostValue
        configuration.tls = try tlsFiles()
        configuration.tlsClientCA = try environment.value(tlsClientCA, "tls-client-ca")
        configuration.rateLimit = RateLimit(requestsPerSecond: rateLimitValue, burst: rateBurstValue)
        configuration.anonymousRateLimit = RateLimit(
            requestsPerSecond: anonymousRateLimitValue,
            burst: anonymousRateLimitValue * 2
        )
        configuration.anonymousOverallRateLimit = RateLimit(
            requestsPerSecond: anonymousOverallRateLimitValue,
            burst: anonymousOverallRateLimitValue * 2
        )
        configuration.trustedProxies = try TrustedProxies(trustedProxies)
        configuration.metricsRequireToken = metricsToken
        configuration.drainDelay = .milliseconds(Int64(drainDelaySeconds * 1000))
        configuration.console = !noConsole
        // Apple's keys: a file, or fetched (and shut down after the server) from a URL.
        var keyClient: HTTPClient?
        if let jwksPath {
            configuration.apple = try await AppleVerifier.load(jwksPath: jwksPath, audiences: audiences)
            logger.notice("verified capture on: identity tokens are required", metadata: ["apple.jwks": "\(jwksPath)"])
        } else if !audiences.isEmpty {
            let url = jwksURLText.flatMap(URL.init(string:)) ?? AppleKeyFetcher.appleURL
            let client = AppleKeyFetcher.makeClient(logger: logger)
            keyClient = client
            let fetcher = AppleKeyFetcher(AppleKeyFetcher.Configuration(url: url), client: client, logger: logger)
            // Not fatal: without keys every token is refused until a later fetch succeeds (logged).
            await fetcher.refresh()
            configuration.apple = AppleVerifier(fetcher: fetcher, audiences: audiences)
            logger.notice(
                "verified capture on: identity tokens are required",
                metadata: ["apple.jwks.url": "\(url.absoluteString)"]
            )
        }
        configuration.signIn = try signIn.configuration(environment)
        if let forwarding = try forwarderConfiguration() {
            configuration.notificationForwarder = NotificationForwarder(
                forwarding,
                outbox: opened.notifications,
                keyring: { escrow.keyring },
                clock: escrow.configuration.clock,
                logger: logger
            )
            logger.notice(
                "Apple notifications are forwarded to the backend (queued sealed in the store until taken)",
                metadata: ["forward.url": "\(forwarding.url.absoluteString)"]
            )
        }
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
            telemetry: traces.map { [$0.service] } ?? [],
            logger: logger
        )
        do {
            try await server.run()
        } catch {
            try? await keyClient?.shutdown()
            throw error
        }
        try await keyClient?.shutdown()
        try await tokens.close()
        try await opened.close()
        logger.notice("stopped")
    }

    static func version(_ number: Int) -> String {
        "\(number / 1_000_000).\(number / 1_000 % 1_000).\(number % 1_000)"
    }
}
