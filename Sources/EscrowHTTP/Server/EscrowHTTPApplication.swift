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
/// let app = try EscrowHTTPApplication.build(
///     escrow: escrow, tokens: tokenStore, notifications: store, registry: registry,
///     configuration: configuration, dependencies: EscrowHTTPDependencies(apple: verifier), logger: logger
/// )
/// try await ServiceGroup(services: [app], ...).run()
/// ```
public enum EscrowHTTPApplication {
    public typealias App = Application<RouterResponder<EscrowRequestContext>>

    /// The application: a swift-service-lifecycle `Service` that serves until graceful shutdown
    /// (in-flight requests finish).
    ///
    /// - Parameter registry: where `/metrics` reads from. The process that bootstraps `MetricsSystem`
    ///   with ``EscrowPrometheus/factory(registry:)`` over the same registry also exports the library's
    ///   counters, named by Prometheus convention.
    ///
    /// With ``EscrowHTTPConfiguration/publicPort`` set, this is the internal listener only (the token-guarded routes
    /// and the operational ones); ``buildPublic(escrow:tokens:notifications:signIns:configuration:dependencies:logger:)`` is the
    /// other.
    public static func build(
        escrow: Escrow,
        tokens: any AccessTokenStore,
        notifications: any NotificationLog,
        signIns: (any SignInStore)? = nil,
        registry: PrometheusCollectorRegistry,
        configuration: EscrowHTTPConfiguration,
        dependencies: EscrowHTTPDependencies = EscrowHTTPDependencies(),
        draining: DrainState? = nil,
        overview: AdminOverviewPublisher? = nil,
        logger: Logger
    ) throws -> App {
        let router = buildRouter(
            escrow: escrow,
            tokens: tokens,
            notifications: notifications,
            signIns: signIns,
            registry: registry,
            configuration: configuration,
            dependencies: dependencies,
            draining: draining,
            overview: overview,
            surface: configuration.publicPort == nil ? .all : .internalAPI
        )
        return try application(
            router,
            host: configuration.host,
            port: configuration.port,
            tls: dependencies.tls,
            clientCA: configuration.tlsClientCA,
            configuration,
            logger
        )
    }

    /// The public listener of ``EscrowHTTPConfiguration/publicPort``: web sign-in's start and callback, Apple
    /// notifications and `/healthz`, nothing token-guarded.
    public static func buildPublic(
        escrow: Escrow,
        tokens: any AccessTokenStore,
        notifications: any NotificationLog,
        signIns: (any SignInStore)? = nil,
        configuration: EscrowHTTPConfiguration,
        dependencies: EscrowHTTPDependencies = EscrowHTTPDependencies(),
        logger: Logger
    ) throws -> App {
        let base = baseRouter(
            escrow: escrow,
            tokens: tokens,
            notifications: notifications,
            signIns: signIns,
            configuration: configuration,
            dependencies: dependencies,
            surface: .publicAPI
        )
        OperationalRoutes.registerHealth(on: base.router)
        base.allowedMethods.load(base.router)
        return try application(
            base.router,
            host: configuration.publicHost ?? configuration.host,
            port: configuration.publicPort ?? 0,
            tls: dependencies.tls,
            clientCA: nil,
            configuration,
            logger
        )
    }

    /// The server of one listener: HTTP/1.1, over TLS when `tls` is given (`clientCA`: mutual TLS).
    private static func application(
        _ router: Router<EscrowRequestContext>,
        host: String,
        port: Int,
        tls: TLSCertificateFiles?,
        clientCA: String?,
        _ configuration: EscrowHTTPConfiguration,
        _ logger: Logger
    ) throws -> App {
        // The pages' templates, read once before listening: missing (a binary copied without its resource folder),
        // the listener does not start, and the error names the folder.
        try PageTemplates.load()
        let deadlines = ConnectionDeadlineHandler.Deadlines(
            head: TimeAmount(configuration.requestHeadTimeout),
            body: TimeAmount(configuration.requestBodyTimeout)
        )
        // Head, body and idle deadlines, and a cap on open connections: slow or idle clients cannot hold
        // sockets (see ConnectionDeadlineHandler).
        let http1 = HTTPServerBuilder.http1(
            configuration: .init(
                additionalChannelHandlers: [ConnectionDeadlineHandler(deadlines: deadlines)],
                idleTimeout: TimeAmount(configuration.idleTimeout)
            )
        )
        let server =
            try tls.map {
                try HTTPServerBuilder.tls(http1, tlsConfiguration: $0.serverConfiguration(clientCA: clientCA))
            } ?? http1
        return Application(
            router: router,
            server: server,
            configuration: .init(
                address: .hostname(host, port: port),
                availableConnectionsDelegate: MaximumAvailableConnections(configuration.maximumConnections)
            ),
            logger: logger
        )
    }

    /// What both listeners share: a router with the request span (when tracing), the access log line, problem
    /// answers and metrics, the token and anonymous rate limits, and `surface`'s half of the `/v1` routes.
    private static func baseRouter(
        escrow: Escrow,
        tokens: any AccessTokenStore,
        notifications: any NotificationLog,
        signIns: (any SignInStore)?,
        configuration: EscrowHTTPConfiguration,
        dependencies: EscrowHTTPDependencies,
        surface: EscrowRouteCollection.Surface
    ) -> Base {
        let router = Router(context: EscrowRequestContext.self, options: .autoGenerateHeadEndpoints)
        let allowedMethods = AllowedMethods()
        if let tracer = escrow.configuration.tracer { router.add(middleware: RequestTracingMiddleware(tracer: tracer)) }
        router.add(middleware: AccessLogMiddleware())
        router.add(middleware: ProblemMiddleware(allowedMethods: allowedMethods))
        router.add(middleware: MetricsMiddleware())
        let auth = BearerAuthenticator(store: tokens, rateLimiter: RateLimiter(limit: configuration.rateLimit))
        let anonymous = ClientRateLimiter(configuration)
        let v1 = router.group("/v1")
        EscrowRouteCollection.register(
            on: v1,
            escrow: escrow,
            auth: auth,
            notifications: notifications,
            signIns: signIns,
            anonymous: anonymous,
            configuration: configuration,
            dependencies: dependencies,
            surface: surface
        )
        return Base(router: router, v1: v1, auth: auth, anonymous: anonymous, allowedMethods: allowedMethods)
    }

    /// What ``baseRouter(escrow:tokens:notifications:signIns:configuration:dependencies:surface:)`` made: the router, its `/v1`
    /// group, the token and anonymous limits, and the table of its methods, to load once every route is registered.
    private struct Base {
        let router: Router<EscrowRequestContext>
        let v1: RouterGroup<EscrowRequestContext>
        let auth: BearerAuthenticator
        let anonymous: ClientRateLimiter
        let allowedMethods: AllowedMethods
    }

    public static func buildRouter(
        escrow: Escrow,
        tokens: any AccessTokenStore,
        notifications: any NotificationLog,
        signIns: (any SignInStore)? = nil,
        registry: PrometheusCollectorRegistry,
        configuration: EscrowHTTPConfiguration,
        dependencies: EscrowHTTPDependencies = EscrowHTTPDependencies(),
        draining: DrainState? = nil,
        overview: AdminOverviewPublisher? = nil,
        surface: EscrowRouteCollection.Surface = .all
    ) -> Router<EscrowRequestContext> {
        let base = baseRouter(
            escrow: escrow,
            tokens: tokens,
            notifications: notifications,
            signIns: signIns,
            configuration: configuration,
            dependencies: dependencies,
            surface: surface
        )
        // The operator's API and console: the overview they show is published off the request path (by the
        // publisher's own service when the caller runs it; else read when the last one is stale).
        let overview = overview ?? AdminOverviewPublisher(escrow: escrow, logger: Logger(label: "profile-escrow.admin"))
        AdminRoutes(
            actions: OperatorActions(escrow: escrow, overviews: overview, backend: dependencies.backend),
            auth: base.auth,
            maximumBodySize: configuration.maximumBodySize
        ).register(on: base.v1.group("admin"))
        if configuration.console {
            ConsoleRoutes(
                escrow: escrow,
                tokens: tokens,
                overview: overview,
                sessions: ConsoleSessions(store: escrow.store),
                anonymous: base.anonymous,
                backend: dependencies.backend
            ).register(on: base.router)
        }
        OperationalRoutes(
            escrow: escrow,
            auth: base.auth,
            registry: registry,
            metricsRequireToken: configuration.metricsRequireToken,
            anonymous: base.anonymous,
            draining: draining,
            appleSigning: dependencies.appleTokenExchanger?.signing
        ).register(on: base.router)
        base.allowedMethods.load(base.router)
        return base.router
    }

    /// `GET /metrics` alone, for a process without the API (`profile-escrow replay --metrics-port`): the registry
    /// as Prometheus text, with help lines.
    public static func metricsOnly(
        registry: PrometheusCollectorRegistry,
        host: String,
        port: Int,
        logger: Logger
    ) -> some Service {
        let router = Router(context: EscrowRequestContext.self, options: .autoGenerateHeadEndpoints)
        router.get("/metrics") { _, _ in OperationalRoutes.exposition(registry) }
        return Application(
            router: router,
            server: .http1(configuration: .init(idleTimeout: .seconds(30))),
            configuration: .init(address: .hostname(host, port: port)),
            logger: logger
        )
    }
}
