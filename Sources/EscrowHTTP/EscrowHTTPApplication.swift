public import EscrowCore
public import Hummingbird
public import Logging
public import ProfileEscrow
public import Prometheus

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
    ///   with a `PrometheusMetricsFactory` over the same registry also exports the library's counters.
    public static func build(
        escrow: Escrow,
        tokens: any AccessTokenStore,
        notifications: any NotificationLog,
        registry: PrometheusCollectorRegistry,
        configuration: EscrowHTTPConfiguration,
        logger: Logger
    ) -> App {
        let router = buildRouter(
            escrow: escrow,
            tokens: tokens,
            notifications: notifications,
            registry: registry,
            configuration: configuration
        )
        return Application(
            router: router,
            // Idle keep-alive connections are closed: slow or idle clients cannot hold sockets forever.
            server: .http1(configuration: .init(idleTimeout: .seconds(30))),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port)),
            logger: logger
        )
    }

    public static func buildRouter(
        escrow: Escrow,
        tokens: any AccessTokenStore,
        notifications: any NotificationLog,
        registry: PrometheusCollectorRegistry,
        configuration: EscrowHTTPConfiguration
    ) -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self, options: .autoGenerateHeadEndpoints)
        router.add(middleware: AccessLogMiddleware())
        router.add(middleware: ProblemMiddleware())
        router.add(middleware: MetricsMiddleware())
        let auth = BearerAuthenticator(store: tokens, rateLimiter: RateLimiter(limit: configuration.rateLimit))
        EscrowRoutes(
            escrow: escrow,
            auth: auth,
            apple: configuration.apple,
            maximumBodySize: configuration.maximumBodySize
        ).register(on: router)
        AppleNotificationRoutes(
            escrow: escrow,
            apple: configuration.apple,
            log: notifications,
            maximumBodySize: configuration.maximumBodySize
        ).register(on: router)
        OperationalRoutes(
            escrow: escrow,
            auth: auth,
            registry: registry,
            metricsRequireToken: configuration.metricsRequireToken
        ).register(on: router)
        return router
    }
}
