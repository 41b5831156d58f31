import HTTPTypes
import Hummingbird

/// The token-less routes' limits (web sign-in, Apple notifications, an open `/metrics`, the console's sign-in): a
/// bucket per route and client (``ClientAddress``), so that one client cannot starve the others, and one per route for
/// all clients together, the cap on what the routes may cost. Probes (`/healthz`, `/readyz`) are never limited: a
/// load balancer must not take a node out because someone else floods it.
final class ClientRateLimiter: Sendable {
    enum Verdict: Equatable {
        case admitted
        /// This client is over its own limit.
        case clientLimited(wait: Int)
        /// All clients together are over the route's limit.
        case overallLimited(wait: Int)
    }

    /// The most clients whose buckets are held at once (about 100 bytes each).
    static let clientCapacity = 100_000

    let perClient: RateLimiter
    let overall: RateLimiter
    let trustedProxies: TrustedProxies

    init(perClient: RateLimit, overall: RateLimit, trustedProxies: TrustedProxies = TrustedProxies()) {
        self.perClient = RateLimiter(limit: perClient, capacity: Self.clientCapacity)
        self.overall = RateLimiter(limit: overall)
        self.trustedProxies = trustedProxies
    }

    convenience init(_ configuration: EscrowHTTPConfiguration) {
        self.init(
            perClient: configuration.anonymousRateLimit,
            overall: configuration.anonymousOverallRateLimit,
            trustedProxies: configuration.trustedProxies
        )
    }

    /// Takes one request of `route` from its client's bucket, then from the route's.
    func acquire(_ route: String, _ request: Request, _ context: some RequestContext) -> Verdict {
        let client = ClientAddress.key(
            peer: (context as? any RemoteAddressRequestContext)?.remoteAddress,
            forwardedFor: trustedProxies.isEmpty ? [] : request.headers[values: .xForwardedFor],
            trusted: trustedProxies
        )
        if let wait = perClient.acquire(route + " " + client) { return .clientLimited(wait: wait) }
        if let wait = overall.acquire(route) { return .overallLimited(wait: wait) }
        return .admitted
    }

    /// Takes one request, or throws `429` with `Retry-After`.
    func admit(_ route: String, _ request: Request, _ context: some RequestContext) throws {
        switch acquire(route, request, context) {
        case .admitted: return
        case .clientLimited(let wait), .overallLimited(let wait): throw Self.tooMany(wait)
        }
    }

    static func tooMany(_ wait: Int) -> Problem {
        Problem(
            .tooManyRequests,
            code: "rate_limited",
            detail: "too many requests; retry later",
            headers: [.retryAfter: "\(wait)"]
        )
    }
}

extension HTTPField.Name {
    /// Not among HTTPTypes' names: the de facto header of proxies.
    static let xForwardedFor = HTTPField.Name("X-Forwarded-For")!
}
