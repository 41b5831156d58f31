import ArgumentParser
import EscrowHTTP

/// `serve`'s rate limits: per token, and per client and route for the token-less routes, with the proxies whose
/// `X-Forwarded-For` names the client. Each also from its `PROFILE_ESCROW_…` variable.
struct RateLimitOptions: ParsableArguments {
    static let defaults = EscrowHTTPConfiguration.default

    @Option(
        name: .customLong("rate-limit"),
        help: """
            Requests per second per token (env PROFILE_ESCROW_RATE_LIMIT; default \
            \(DefaultText.number(defaults.rateLimit.requestsPerSecond))).
            """
    )
    var rateLimit: Double?
    @Option(
        name: .customLong("rate-burst"),
        help:
            "Burst per token (env PROFILE_ESCROW_RATE_BURST; default \(DefaultText.number(defaults.rateLimit.burst)))."
    )
    var rateBurst: Double?
    @Option(
        name: .customLong("anonymous-rate-limit"),
        help: """
            Requests per second per client and route without a token: web sign-in's start and callback, Apple \
            notifications, an open /metrics, the console's sign-in (env PROFILE_ESCROW_ANONYMOUS_RATE_LIMIT; default \
            \(DefaultText.number(defaults.anonymousRateLimit.requestsPerSecond)); burst twice that). /healthz and \
            /readyz are never limited.
            """
    )
    var anonymousRateLimit: Double?
    @Option(
        name: .customLong("anonymous-overall-rate-limit"),
        help: """
            Requests per second per route without a token, all clients together (env \
            PROFILE_ESCROW_ANONYMOUS_OVERALL_RATE_LIMIT; default \
            \(DefaultText.number(defaults.anonymousOverallRateLimit.requestsPerSecond)); burst twice that).
            """
    )
    var anonymousOverallRateLimit: Double?
    @Option(
        name: .customLong("trusted-proxy"),
        help: """
            A proxy (address or CIDR network, repeated or comma-separated) whose X-Forwarded-For tells who the \
            client is, for the per-client limits (env PROFILE_ESCROW_TRUSTED_PROXY; default none).
            """
    )
    var trustedProxy: [String] = []

    /// Sets the limits of `http`; a malformed value is a usage error naming its option.
    func apply(to http: inout EscrowHTTPConfiguration, _ environment: OptionEnvironment) throws {
        http.rateLimit.requestsPerSecond =
            try rate(rateLimit, "rate-limit", environment) ?? http.rateLimit.requestsPerSecond
        http.rateLimit.burst = try rate(rateBurst, "rate-burst", environment) ?? http.rateLimit.burst
        if let limit = try rate(anonymousRateLimit, "anonymous-rate-limit", environment) {
            http.anonymousRateLimit = RateLimit(requestsPerSecond: limit, burst: limit * 2)
        }
        if let limit = try rate(anonymousOverallRateLimit, "anonymous-overall-rate-limit", environment) {
            http.anonymousOverallRateLimit = RateLimit(requestsPerSecond: limit, burst: limit * 2)
        }
        do {
            http.trustedProxies = try TrustedProxies(environment.list(trustedProxy, "trusted-proxy"))
        } catch {
            throw ValidationError("--trusted-proxy (or PROFILE_ESCROW_TRUSTED_PROXY): \(error.description)")
        }
    }

    /// A rate option's value, nil when not given; it must be a positive number.
    private func rate(_ commandLine: Double?, _ option: String, _ environment: OptionEnvironment) throws -> Double? {
        guard let value = try environment.value(commandLine, option) else { return nil }
        guard value > 0 && value.isFinite else {
            throw ValidationError("--\(option) (or its environment variable) must be a positive number")
        }
        return value
    }
}
