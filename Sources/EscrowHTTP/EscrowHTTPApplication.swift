public import EscrowCore
public import Hummingbird
import HummingbirdCore
public import Logging
import NIOCore
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
        let deadlines = ConnectionDeadlineHandler.Deadlines(
            head: TimeAmount(configuration.requestHeadTimeout),
            body: TimeAmount(configuration.requestBodyTimeout)
        )
        return Application(
            router: router,
            // Head, body and idle deadlines, and a cap on open connections: slow or idle clients cannot hold
            // sockets (see ConnectionDeadlineHandler).
            server: .http1(
                configuration: .init(
                    additionalChannelHandlers: [ConnectionDeadlineHandler(deadlines: deadlines)],
                    idleTimeout: TimeAmount(configuration.idleTimeout)
                )
            ),
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port),
                availableConnectionsDelegate: MaximumAvailableConnections(configuration.maximumConnections)
            ),
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
        let anonymous = RateLimiter(limit: configuration.anonymousRateLimit)
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
            maximumBodySize: configuration.maximumBodySize,
            anonymous: anonymous
        ).register(on: router)
        OperationalRoutes(
            escrow: escrow,
            auth: auth,
            registry: registry,
            metricsRequireToken: configuration.metricsRequireToken,
            anonymous: anonymous
        ).register(on: router)
        return router
    }
}
