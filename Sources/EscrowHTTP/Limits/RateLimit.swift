/// A token bucket: `requestsPerSecond` sustained, up to `burst` at once.
public struct RateLimit: Sendable, Equatable {
    public var requestsPerSecond: Double
    public var burst: Double

    public init(requestsPerSecond: Double = 100, burst: Double = 200) {
        self.requestsPerSecond = requestsPerSecond
        self.burst = burst
    }
}
