public import EscrowCore
public import Hummingbird
import HummingbirdCore
import HummingbirdTLS
public import Logging
import NIOCore
public import ProfileEscrow
public import Prometheus
public import ServiceLifecycle

/// The HTTP API on Hummingbird 2.
///
/// ```swift
/// let app = EscrowHTTPApplication.build(
///     escrow: escrow, tokens: tokenStore, notifications: store, registry: registry,
///     configuration: configuration, logger: logger
/// )
/// try await ServiceGroup(services: [app], ...).run()
/// ```
public enum EscrowHTTPApplication {
    public typealias App = Application<RouterResponder<BasicRequestContext>>

    /// The application: a swift-service-lifecycle `Service` that serves until graceful shutdown
    /// (in-flight requests finish).
    ///
    /// - Parameter registry: where `/metrics` reads from. The process that bootstraps `MetricsSystem`
    ///   with ``EscrowPrometheus/factory(registry:)`` over the same registry also exports the library's
    ///   counters, named by Prometheus convention.
    public static func build(
        escrow: Escrow,
        tokens: any AccessTokenStore,
        notifications: any NotificationLog,
        signIns: (any SignInStore)? = nil,
        registry: PrometheusCollectorRegistry,
        configuration: EscrowHTTPConfiguration,
        draining: DrainState? = nil,
        overview: AdminOverviewPublisher? = nil,
        logger: Logger
    ) -> App {
        let router = buildRouter(
            escrow: escrow,
            tokens: tokens,
            notifications: notifications,
            signIns: signIns,
            registry: registry,
            configuration: configuration,
            draining: draining,
            overview: overview
        )
        let deadlines = ConnectionDeadlineHandler.Deadlines(
            head: TimeAmount(configuration.requestHeadTimeout),
            body: TimeAmount(configuration.requestBodyTimeout)
        )
        return Application(
            router: router,
            server: server(configuration, deadlines: deadlines),
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port),
                availableConnectionsDelegate: MaximumAvailableConnections(configuration.maximumConnections)
            ),
            logger: logger
        )
    }

    /// HTTP/1.1 with head, body and idle deadlines (slow or idle clients cannot hold sockets, see
    /// ConnectionDeadlineHandler), behind TLS when the configuration has it.
    static func server(
        _ configuration: EscrowHTTPConfiguration,
        deadlines: ConnectionDeadlineHandler.Deadlines
    ) -> HTTPServerBuilder {
        let http1 = HTTP1Channel.Configuration(
            additionalChannelHandlers: [ConnectionDeadlineHandler(deadlines: deadlines)],
            idleTimeout: TimeAmount(configuration.idleTimeout)
        )
        guard let tls = configuration.tls else { return .http1(configuration: http1) }
        return HTTPServerBuilder { responder in
            try TLSChannel(HTTP1Channel(responder: responder, configuration: http1), tlsConfiguration: tls)
        }
    }

    public static func buildRouter(
        escrow: Escrow,
        tokens: any AccessTokenStore,
        notifications: any NotificationLog,
        signIns: (any SignInStore)? = nil,
        registry: PrometheusCollectorRegistry,
        configuration: EscrowHTTPConfiguration,
        draining: DrainState? = nil,
        overview: AdminOverviewPublisher? = nil
    ) -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self, options: .autoGenerateHeadEndpoints)
        if let tracer = escrow.configuration.tracer { router.add(middleware: RequestTracingMiddleware(tracer: tracer)) }
        router.add(middleware: AccessLogMiddleware())
        router.add(middleware: ProblemMiddleware())
        router.add(middleware: MetricsMiddleware())
        let auth = BearerAuthenticator(store: tokens, rateLimiter: RateLimiter(limit: configuration.rateLimit))
        let anonymous = RateLimiter(limit: configuration.anonymousRateLimit)
        let v1 = router.group("/v1")
        EscrowRouteCollection.register(
            on: v1,
            escrow: escrow,
            auth: auth,
            notifications: notifications,
            signIns: signIns,
            anonymous: anonymous,
            configuration: configuration
        )
        // The operator's API and console: the overview they show is published off the request path (by the
        // publisher's own service when the caller runs it; else read when the last one is stale).
        let overview = overview ?? AdminOverviewPublisher(escrow: escrow, logger: Logger(label: "profile-escrow.admin"))
        AdminRoutes(
            escrow: escrow,
            auth: auth,
            overview: overview,
            maximumBodySize: configuration.maximumBodySize
        ).register(on: v1.group("admin"))
        if configuration.console {
            ConsoleRoutes(
                escrow: escrow,
                tokens: tokens,
                overview: overview,
                sessions: ConsoleSessions(),
                anonymous: anonymous
            ).register(on: router)
        }
        OperationalRoutes(
            escrow: escrow,
            auth: auth,
            registry: registry,
            metricsRequireToken: configuration.metricsRequireToken,
            anonymous: anonymous,
            draining: draining
        ).register(on: router)
        return router
    }

    /// `GET /metrics` alone, for a process without the API (`profile-escrow replay --metrics-port`): the registry
    /// as Prometheus text, with help lines.
    public static func metricsOnly(
        registry: PrometheusCollectorRegistry,
        host: String,
        port: Int,
        logger: Logger
    ) -> some Service {
        let router = Router(context: BasicRequestContext.self, options: .autoGenerateHeadEndpoints)
        router.get("/metrics") { _, _ in OperationalRoutes.exposition(registry) }
        return Application(
            router: router,
            server: .http1(configuration: .init(idleTimeout: .seconds(30))),
            configuration: .init(address: .hostname(host, port: port)),
            logger: logger
        )
    }
}
