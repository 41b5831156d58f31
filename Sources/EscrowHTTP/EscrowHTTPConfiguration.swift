/// How the HTTP service behaves; every property has a default.
public struct EscrowHTTPConfiguration: Sendable {
    /// Address to bind (default loopback).
    public var host: String = "127.0.0.1"
    /// Port to bind; 0 picks a free one.
    public var port: Int = 8080
    /// Per-token rate limit (default 100 requests/s, bursts of 200).
    public var rateLimit = RateLimit()
    /// Verified capture and Apple notifications, when an audience and a JWKS are configured.
    public var apple: AppleVerifier?
    /// Whether `GET /metrics` needs a token with the `metrics` scope (default: open).
    public var metricsRequireToken = false
    /// The largest request body (16 KiB).
    public var maximumBodySize = 16 * 1024

    /// How long `/readyz` answers `503` after SIGTERM before the server stops taking requests (default 0: the
    /// server stops at once; requests in flight still finish). Set it to your load balancer's probe period.
    public var drainDelay: Duration = .zero

    public init() {}
}
