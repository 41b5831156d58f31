public import EscrowCore
public import Hummingbird
public import ProfileEscrow

/// The escrow API as a Hummingbird `RouteCollection`, to mount in your own application under any path, with your
/// own request context:
///
/// ```swift
/// let router = Router(context: MyContext.self)
/// router.addRoutes(
///     EscrowRouteCollection.make(escrow: escrow, tokens: tokenStore, context: MyContext.self),
///     atPath: "/auth/escrow"
/// )
/// // POST /auth/escrow/escrows, GET /auth/escrow/escrows/{userIdentifier}, …
/// ```
///
/// The routes are relative: `escrows`, `escrows/{userIdentifier}` and its `replay`, `confirm` and `requeue`,
/// `apple/notifications` when a notification log is given, and `apple/signin`, `apple/signin/callback`,
/// `apple/attempts`, `apple/native/capture` and `apple/signin/tickets/redeem` when a sign-in store,
/// ``EscrowHTTPConfiguration/signIn`` and ``EscrowHTTPDependencies/apple`` are (`serve` mounts them at `/v1`).
/// Errors inside them are answered as `application/problem+json`; callers authenticate with the bearer tokens of
/// `tokens`. The operational routes (`/healthz`, `/readyz`, `/metrics`) stay your application's.
///
/// `surface` splits them between two routers, as `serve --public-port` does: `.publicAPI` for the browser and Apple
/// (web sign-in's start and callback, Apple notifications: no token), `.internalAPI` for your backend (everything
/// token-guarded, the ticket's redeem included).
public enum EscrowRouteCollection {
    /// Which routes a router gets.
    public enum Surface: Sendable {
        /// Every route.
        case all
        /// The token-guarded routes: escrows, the sign-in ticket's redeem.
        case internalAPI
        /// The browser's, the apps' and Apple's: web sign-in's start and callback, an app's attempt and native
        /// capture, Apple notifications.
        case publicAPI
    }

    public static func make<Context: RequestContext>(
        escrow: Escrow,
        tokens: any AccessTokenStore,
        notifications: (any NotificationLog)? = nil,
        signIns: (any SignInStore)? = nil,
        configuration: EscrowHTTPConfiguration = EscrowHTTPConfiguration(),
        dependencies: EscrowHTTPDependencies = EscrowHTTPDependencies(),
        surface: Surface = .all,
        context: Context.Type = Context.self
    ) -> RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.add(middleware: ProblemMiddleware<Context>())
        // The routes see your context with a caller slot added (and your peer address, when your context has one).
        register(
            on: routes.group(context: CallerChildContext<Context>.self),
            escrow: escrow,
            auth: BearerAuthenticator(store: tokens, rateLimiter: RateLimiter(limit: configuration.rateLimit)),
            notifications: notifications,
            signIns: signIns,
            anonymous: ClientRateLimiter(configuration),
            configuration: configuration,
            dependencies: dependencies,
            surface: surface
        )
        return routes
    }

    /// Registers `surface`'s routes on `routes`: the token-guarded ones on a group that authenticates the caller
    /// (``BearerAuthentication``), each behind its scope (``RequireScope``).
    static func register<Context: CallerRequestContext>(
        on routes: some RouterMethods<Context>,
        escrow: Escrow,
        auth: BearerAuthenticator,
        notifications: (any NotificationLog)?,
        signIns: (any SignInStore)? = nil,
        anonymous: ClientRateLimiter,
        configuration: EscrowHTTPConfiguration,
        dependencies: EscrowHTTPDependencies,
        surface: Surface = .all
    ) {
        let guarded = routes.group().add(middleware: BearerAuthentication(auth))
        if surface != .publicAPI {
            EscrowRoutes(
                escrow: escrow,
                apple: dependencies.apple,
                exchangesCodes: configuration.exchangesAppleCodes,
                maximumBodySize: configuration.maximumBodySize
            ).register(on: guarded)
            AppleRevocationRoutes(
                escrow: escrow,
                defaultClientID: configuration.signIn?.clientID,
                maximumBodySize: configuration.maximumBodySize
            ).register(on: guarded)
        }
        if let notifications, surface != .internalAPI {
            AppleNotificationRoutes(
                escrow: escrow,
                apple: dependencies.apple,
                log: notifications,
                maximumBodySize: configuration.maximumBodySize,
                anonymous: anonymous,
                forwarder: dependencies.notificationForwarder
            ).register(on: routes)
        }
        if let signIns, let apple = dependencies.apple, let signIn = configuration.signIn {
            AppleSignInRoutes(
                escrow: escrow,
                signIns: signIns,
                apple: apple,
                configuration: signIn,
                auth: auth,
                maximumBodySize: configuration.maximumBodySize,
                anonymous: anonymous
            ).register(on: routes, surface: surface)
        } else {
            // Sign-in off: its paths still answer, with 404 (so another method on them is a 405, as on any documented
            // path); the redeem checks its token first (401, 403), as every token route.
            if surface != .internalAPI {
                routes.get("apple/signin") { _, _ -> Response in throw signInOff }
                routes.post("apple/signin/callback") { _, _ -> Response in throw signInOff }
                routes.post("apple/attempts") { _, _ -> Response in throw signInOff }
                routes.post("apple/native/capture") { _, _ -> Response in throw signInOff }
            }
            if surface != .publicAPI {
                guarded.group().add(middleware: RequireScope(.signin))
                    .post("apple/signin/tickets/redeem") { _, _ -> Response in throw signInOff }
            }
        }
    }

    static let signInOff = Problem(.notFound, code: "route_not_found", detail: "web sign-in is not configured here")
}
