public import NIOSSL

/// How the HTTP service behaves; every property has a default.
public struct EscrowHTTPConfiguration: Sendable {
    /// Address to bind (default loopback).
    public var host: String = "127.0.0.1"
    /// Port to bind; 0 picks a free one.
    public var port: Int = 8080
    /// TLS on the listener (``ServerTLS`` builds one from certificate and key files, reloaded when they change,
    /// with optional client certificates); nil serves plain HTTP, for a proxy that terminates TLS in front.
    public var tls: TLSConfiguration?
    /// Per-token rate limit (default 100 requests/s, bursts of 200).
    public var rateLimit = RateLimit()
    /// Requests without a token (`/healthz`, `/readyz`, an open `/metrics`, Apple notifications): one bucket
    /// per route, shared by every client (default 50 requests/s, bursts of 100).
    public var anonymousRateLimit = RateLimit(requestsPerSecond: 50, burst: 100)
    /// Verified capture and Apple notifications, when an audience and a JWKS are configured.
    public var apple: AppleVerifier?
    /// Web sign-in (`/v1/apple/signin…`), served when set with ``apple`` and a sign-in store.
    public var signIn: AppleSignInConfiguration?
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
