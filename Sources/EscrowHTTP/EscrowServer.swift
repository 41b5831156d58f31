public import EscrowCore
public import Logging
public import ProfileEscrow
public import Prometheus
public import ServiceLifecycle

/// The whole HTTP service of one process, as `profile-escrow serve` runs it: the PurgeFlusher, the
/// replay worker (unless `worker` is nil) and the HTTP application, started and stopped in the right
/// order (see ``EscrowServiceGroup``). The CLI and the tests build the service through this one type,
/// as Hummingbird applications share their `buildApplication`.
///
/// ```swift
/// let server = EscrowServer(
///     escrow: escrow, tokens: tokenStore, notifications: store, registry: registry,
///     configuration: httpConfiguration, worker: workerConfiguration, logger: logger
/// )
/// try await server.run()   // until SIGTERM or SIGINT
/// ```
public struct EscrowServer: Sendable {
    public let escrow: Escrow
    public let tokens: any AccessTokenStore
    public let notifications: any NotificationLog
    /// Web sign-in attempts (the escrow store's own); the sign-in routes are served when this and
    /// ``EscrowHTTPConfiguration/signIn`` are set.
    public let signIns: (any SignInStore)?
    public let registry: PrometheusCollectorRegistry
    public let configuration: EscrowHTTPConfiguration
    /// The replay worker's settings; nil runs the HTTP API alone.
    public let worker: ReplayWorker.Configuration?
    /// The keyring file to follow (reloaded on SIGHUP and when it changes); nil keeps the keyring given.
    public let keyringPath: String?
    /// Services started before all others and stopped after them, such as a tracing exporter (so that the spans of
    /// the last requests and deliveries are still sent).
    public let telemetry: [any Service]
    public let logger: Logger

    public init(
        escrow: Escrow,
        tokens: any AccessTokenStore,
        notifications: any NotificationLog,
        signIns: (any SignInStore)? = nil,
        registry: PrometheusCollectorRegistry,
        configuration: EscrowHTTPConfiguration,
        worker: ReplayWorker.Configuration?,
        keyringPath: String? = nil,
        telemetry: [any Service] = [],
        logger: Logger
    ) {
        self.escrow = escrow
        self.tokens = tokens
        self.notifications = notifications
        self.signIns = signIns
        self.registry = registry
        self.configuration = configuration
        self.worker = worker
        self.keyringPath = keyringPath
        self.telemetry = telemetry
        self.logger = logger
    }

    /// The services in start order: telemetry, flusher, keyring reloader, worker (or, without one, the live-gauge
    /// refresher), notification forwarder, TLS reloader, the admin overview publisher, HTTP application (and its
    /// public listener), drain marker.
    public func services() throws -> [any Service] {
        let draining = DrainState()
        let overview = AdminOverviewPublisher(escrow: escrow, logger: logger)
        let app = try EscrowHTTPApplication.build(
            escrow: escrow,
            tokens: tokens,
            notifications: notifications,
            signIns: signIns,
            registry: registry,
            configuration: configuration,
            draining: draining,
            overview: overview,
            logger: logger
        )
        let services = try EscrowServiceGroup.replayServices(
            escrow: escrow,
            worker: worker,
            keyringPath: keyringPath,
            logger: logger
        )
        // The worker publishes the live gauges after each sweep; without it, a refresher does, so that
        // `/metrics` never has to query the store.
        let gauges: [any Service] =
            worker == nil
            ? [
                LiveGaugeRefresher(
                    escrow: escrow,
                    factory: EscrowPrometheus.factory(registry: registry),
                    logger: logger
                )
            ]
            : []
        // The public listener, when there is one: the browser's and Apple's routes apart from the token-guarded API.
        let publicApp: [any Service] =
            configuration.publicPort == nil
            ? []
            : [
                try EscrowHTTPApplication.buildPublic(
                    escrow: escrow,
                    tokens: tokens,
                    notifications: notifications,
                    signIns: signIns,
                    configuration: configuration,
                    logger: logger
                )
            ]
        // Last, so it hears SIGTERM first: /readyz answers 503 from then on.
        let drain = DrainService(state: draining, delay: configuration.drainDelay, clock: escrow.configuration.clock)
        let forwarder: [any Service] = configuration.notificationForwarder.map { [$0] } ?? []
        let tlsReloader: [any Service] = configuration.tls.map { [TLSReloader(files: $0, logger: logger)] } ?? []
        return telemetry + services + gauges + forwarder + tlsReloader + [overview, app] + publicApp + [drain]
    }

    /// How long graceful shutdown may take: the drain delay, then the worker's bound (its delivery timeout +
    /// 10 s, 40 s with the defaults), or 10 s for the HTTP API alone.
    public var shutdownBound: Duration { configuration.drainDelay + (worker?.gracefulShutdownBound ?? .seconds(10)) }

    /// Serves until SIGTERM or SIGINT, then shuts down gracefully within ``shutdownBound``.
    public func run() async throws {
        try await EscrowServiceGroup.run(try services(), shutdownBound: shutdownBound, logger: logger)
    }
}
