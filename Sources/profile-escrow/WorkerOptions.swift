import ArgumentParser
import EscrowCore
import EscrowCrypto
import Foundation
import Logging
import NIOSSL
import ProfileEscrow

/// The replay worker's tuning, shared by `replay` and `serve`; each option also from its
/// `PROFILE_ESCROW_…` variable (``OptionEnvironment``).
struct WorkerOptions: ParsableArguments {
    /// The worker's defaults (``ReplayWorker/Configuration``) and the retry schedule's (``EscrowConfiguration``),
    /// shown in the help texts and used when an option is not given.
    static let defaults = ReplayWorker.Configuration.default
    static let escrowDefaults = EscrowConfiguration.default

    @Option(help: "The backend's registration URL (env PROFILE_ESCROW_BACKEND_URL).") var backend: String?
    @Option(
        help:
            "Requests to the backend in flight at once (env PROFILE_ESCROW_CONCURRENCY; default \(defaults.concurrency))."
    )
    var concurrency: Int?
    @Option(
        help: """
            Attempts before a retryable failure makes an escrow dead (env PROFILE_ESCROW_MAX_ATTEMPTS; default \
            \(escrowDefaults.retryPolicy.maxAttempts)).
            """
    )
    var maxAttempts: Int?
    @Option(
        help: """
            First backoff ceiling, doubling per attempt, full jitter (env PROFILE_ESCROW_BACKOFF_BASE; default \
            \(DefaultText.duration(escrowDefaults.retryPolicy.base))).
            """
    )
    var backoffBase: String?
    @Option(
        help: """
            Largest wait between attempts, Retry-After included (env PROFILE_ESCROW_BACKOFF_MAX; default \
            \(DefaultText.duration(escrowDefaults.retryPolicy.cap))).
            """
    )
    var backoffMax: String?
    @Option(
        help: """
            How long a claimed escrow stays this worker's: at least --delivery-timeout plus 10% of it (at most 5s) \
            (env PROFILE_ESCROW_LEASE; default \(DefaultText.duration(defaults.leaseDuration))).
            """
    )
    var lease: String?
    @Option(
        help: """
            The most one delivery may take, reading the answer included (env PROFILE_ESCROW_DELIVERY_TIMEOUT; default \
            \(DefaultText.duration(defaults.deliveryTimeout))).
            """
    )
    var deliveryTimeout: String?
    @Option(
        help: """
            How long to wait for a confirm call after a 202 (env PROFILE_ESCROW_CONFIRM_TIMEOUT; default \
            \(DefaultText.duration(escrowDefaults.confirmTimeout))).
            """
    )
    var confirmTimeout: String?
    @Option(
        help: """
            How often an idle worker looks for due escrows (env PROFILE_ESCROW_POLL_INTERVAL; default \
            \(DefaultText.duration(defaults.pollInterval))).
            """
    )
    var pollInterval: String?
    @Option(
        help: """
            How often expired escrows are purged while running (env PROFILE_ESCROW_SWEEP_INTERVAL; default \
            \(DefaultText.duration(defaults.sweepInterval))).
            """
    )
    var sweepInterval: String?
    @Option(
        help:
            "The worker's name in leases and audit events (env PROFILE_ESCROW_WORKER_ID; default <host>-<pid>-<random>)."
    )
    var workerId: String?
    @Option(
        help: """
            Deliveries a second for the whole cluster: every node sharing the store takes turns from one schedule \
            (env PROFILE_ESCROW_DELIVERY_RATE; default no limit but --concurrency). Give every node the same rate.
            """
    )
    var deliveryRate: Double?

    @Option(
        name: .customLong("backend-ca"),
        help: "Trust this PEM CA for the backend instead of the system's (env PROFILE_ESCROW_BACKEND_CA)."
    )
    var backendCA: String?
    @Option(
        name: .customLong("backend-client-certificate"),
        help: "A PEM client certificate for the backend (mutual TLS; env PROFILE_ESCROW_BACKEND_CLIENT_CERTIFICATE)."
    )
    var backendClientCertificate: String?
    @Option(
        name: .customLong("backend-client-key"),
        help: "The PEM key of --backend-client-certificate (env PROFILE_ESCROW_BACKEND_CLIENT_KEY)."
    )
    var backendClientKey: String?

    /// TLS toward the backend; nil with none of its options (the system's trust store, no client certificate).
    func backendTLS(_ environment: OptionEnvironment = .process) throws -> TLSConfiguration? {
        let ca = try environment.value(backendCA, "backend-ca")
        let certificate = try environment.value(backendClientCertificate, "backend-client-certificate")
        let key = try environment.value(backendClientKey, "backend-client-key")
        guard ca != nil || certificate != nil || key != nil else { return nil }
        guard (certificate == nil) == (key == nil) else {
            throw ValidationError("--backend-client-certificate and --backend-client-key go together")
        }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if let ca {
            do {
                tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(ca))
            } catch {
                throw ValidationError("--backend-ca: \(ca) does not load as PEM certificates")
            }
        }
        if let certificate, let key {
            do {
                let chain = try NIOSSLCertificate.fromPEMFile(certificate)
                tls.certificateChain = chain.map { .certificate($0) }
            } catch {
                throw ValidationError("--backend-client-certificate: \(certificate) does not load as PEM")
            }
            do {
                tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))
            } catch {
                throw ValidationError("--backend-client-key: \(key) does not load as a PEM private key")
            }
        }
        return tls
    }

    static let secretVariable = "PROFILE_ESCROW_WEBHOOK_SECRET"
    static let backendVariable = "PROFILE_ESCROW_BACKEND_URL"

    /// The worker's settings from options and environment; every problem is a usage error (exit 2).
    func workerConfiguration(_ environment: OptionEnvironment = .process) throws -> ReplayWorker.Configuration {
        guard let url = try environment.value(backend, "backend-url"), !url.isEmpty else {
            throw ValidationError("--backend: give the registration URL (or set \(Self.backendVariable))")
        }
        guard let secret = try environment.value(String?.none, "webhook-secret", secret: true) else {
            throw ValidationError(
                "no webhook secret: set \(Self.secretVariable) to whsec_<base64>. Every delivery is signed so the "
                    + "backend can verify it; unsigned deliveries are not supported."
            )
        }
        do {
            var configuration = try ReplayWorker.Configuration(backendURL: url, webhookSecret: secret)
            configuration.concurrency = try environment.value(concurrency, "concurrency") ?? configuration.concurrency
            configuration.leaseDuration =
                try Self.duration(lease, "lease", environment) ?? configuration.leaseDuration
            configuration.deliveryTimeout =
                try Self.duration(deliveryTimeout, "delivery-timeout", environment) ?? configuration.deliveryTimeout
            configuration.pollInterval =
                try Self.duration(pollInterval, "poll-interval", environment) ?? configuration.pollInterval
            configuration.sweepInterval =
                try Self.duration(sweepInterval, "sweep-interval", environment) ?? configuration.sweepInterval
            if let workerId = try environment.value(workerId, "worker-id") { configuration.workerID = workerId }
            configuration.deliveryRate = try environment.value(deliveryRate, "delivery-rate")
            configuration.backendTLS = try backendTLS(environment)
            try configuration.validate()
            return configuration
        } catch let error as EscrowError {
            throw ValidationError(error.message)
        }
    }

    func escrowConfiguration(
        _ options: GlobalOptions,
        _ environment: OptionEnvironment = .process
    ) throws -> EscrowConfiguration {
        var configuration = options.escrowConfiguration
        var retry = configuration.retryPolicy
        retry.maxAttempts = try environment.value(maxAttempts, "max-attempts") ?? retry.maxAttempts
        guard (1...10_000).contains(retry.maxAttempts) else {
            throw ValidationError("--max-attempts: must be 1 to 10000")
        }
        retry.base = try Self.duration(backoffBase, "backoff-base", environment) ?? retry.base
        retry.cap = try Self.duration(backoffMax, "backoff-max", environment) ?? retry.cap
        guard retry.base <= retry.cap else { throw ValidationError("--backoff-base must not exceed --backoff-max") }
        configuration.retryPolicy = retry
        configuration.confirmTimeout =
            try Self.duration(confirmTimeout, "confirm-timeout", environment) ?? configuration.confirmTimeout
        return configuration
    }

    /// The escrow a long-running process (`serve`, `replay`) works on, with the trace exporter the OTEL_* environment
    /// asks for (nil: no spans). A keyring in custody was unwrapped to get here, so its gauge says so.
    func escrow(
        opened: StoreLocation.Opened,
        keyring: Keyring,
        _ options: GlobalOptions,
        process: String,
        logger: Logger
    ) throws -> (Escrow, OpenTelemetryTraces?) {
        let traces = try OpenTelemetryTraces.make(
            environment: options.environment,
            processName: process,
            logger: logger
        )
        var configuration = try escrowConfiguration(options)
        configuration.tracer = traces?.tracer
        let escrow = Escrow(
            store: opened.store,
            signIns: opened.signIns,
            notifications: opened.notifications,
            keyring: keyring,
            configuration: configuration,
            logger: logger
        )
        if keyring.custody != nil { escrow.custodyHealth.succeeded() }
        return (escrow, traces)
    }

    /// A duration option: the command line, else its variable; nil when neither is set (the configuration's default
    /// stays). Named in the error by where it came from.
    static func duration(
        _ commandLine: String?,
        _ option: String,
        _ environment: OptionEnvironment
    ) throws -> Double? {
        let fromEnvironment = commandLine == nil ? environment.text(option) : nil
        guard let text = commandLine ?? fromEnvironment else { return nil }
        guard let seconds = DurationParser.seconds(text), seconds > 0 else {
            let source = fromEnvironment != nil ? OptionEnvironment.variable(option) : "--\(option)"
            throw ValidationError("\(source): '\(text)' is not a duration such as 250ms, 5s, 10m, 1h")
        }
        return seconds
    }
}
