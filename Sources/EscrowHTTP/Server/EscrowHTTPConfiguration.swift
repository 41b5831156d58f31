/// How the HTTP service behaves, as plain values; every property has a default, written here only. What is built
/// rather than configured (Apple's verifier, the notification forwarder, the loaded TLS pair) is an
/// ``EscrowHTTPDependencies``, passed beside it.
public struct EscrowHTTPConfiguration: Sendable {
    /// The defaults, for help texts and documentation.
    public static let `default` = EscrowHTTPConfiguration()

    /// Address to bind (default loopback).
    public var host: String = "127.0.0.1"
    /// Port to bind; 0 picks a free one.
    public var port: Int = 8080
    /// A second listener for the browser-facing routes only (web sign-in's start and callback, Apple notifications,
    /// `/healthz`), apart from the token-guarded API on ``port``; nil serves everything on ``port``. 0 picks a free
    /// one.
    public var publicPort: Int?
    /// The public listener's address (default ``host``).
    public var publicHost: String?
    /// With ``EscrowHTTPDependencies/tls``: clients of the internal listener (``port``) must present a certificate
    /// issued by this CA file (mutual TLS). The public listener never asks for one.
    public var tlsClientCA: String?
    /// Per-token rate limit (default 100 requests/s, bursts of 200).
    public var rateLimit = RateLimit()
    /// Requests without a token (web sign-in's start and callback, Apple notifications, an open `/metrics`, the
    /// console's sign-in): a bucket per route and client (default 10 requests/s, bursts of 20). Probes (`/healthz`,
    /// `/readyz`) are never limited.
    public var anonymousRateLimit = RateLimit(requestsPerSecond: 10, burst: 20)
    /// The same routes, all clients together: a bucket per route (default 500 requests/s, bursts of 1,000).
    public var anonymousOverallRateLimit = RateLimit(requestsPerSecond: 500, burst: 1000)
    /// Connections from these networks are proxies that say who the client is in `X-Forwarded-For` (default none:
    /// the peer is the client). Only the address the last trusted proxy saw counts, never the client's own words.
    public var trustedProxies = TrustedProxies()
    /// Web sign-in (`/v1/apple/signin…`), served when set with ``EscrowHTTPDependencies/apple`` and a sign-in store.
    public var signIn: AppleSignInConfiguration?
    /// Whether a verified capture's `authorizationCode` (`POST /v1/escrows`) is queued for its exchange here, in the
    /// capture's transaction, for an ``AppleTokenExchanger`` to redeem (default off: the profile is captured and the
    /// code dropped, never stored). `serve` sets it, and the web sign-in's
    /// ``AppleSignInConfiguration/exchangesCodes``, when Apple's token exchange is configured.
    public var exchangesAppleCodes = false
    /// Whether `GET /metrics` needs a token with the `metrics` scope (default: open).
    public var metricsRequireToken = false
    /// The largest request body (16 KiB).
    public var maximumBodySize = 16 * 1024

    /// A request head must be complete within this long of the connection opening or of the previous
    /// response's end; this also bounds an idle keep-alive connection (default 10 s).
    public var requestHeadTimeout: Duration = .seconds(10)
    /// A request body must be complete within this long of its head, however it trickles (default 20 s).
    public var requestBodyTimeout: Duration = .seconds(20)
    /// A connection with no read or write for this long is closed (default 30 s).
    public var idleTimeout: Duration = .seconds(30)
    /// At most this many connections are open at once; further ones wait in the listen backlog
    /// (default 1,024).
    public var maximumConnections = 1024
    /// How long `/readyz` answers `503` after SIGTERM before the server stops taking requests (default 0: the
    /// server stops at once; requests in flight still finish). Set it to your load balancer's probe period.
    public var drainDelay: Duration = .zero

    /// Whether the operator console is served at `/console/` (default on; it needs a token with `read`, `operate`,
    /// `erase` or `audit` to sign in).
    public var console = true

    public init() {}
}
