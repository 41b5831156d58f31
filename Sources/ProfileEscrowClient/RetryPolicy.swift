/// How often, and how long apart, one round (a completion, or a resume at launch) tries to capture before it leaves
/// the credential for the next launch: exponential backoff, bounded in tries and in each wait.
@available(iOS 16, macOS 13, tvOS 16, watchOS 9, visionOS 1, *)
public struct RetryPolicy: Sendable, Hashable {
    /// Requests in one round, the first included.
    public var tries: Int
    /// The wait after the first failure; each later one doubles it.
    public var firstDelay: Duration
    /// The longest wait. A `Retry-After` longer than this ends the round (the escrow asked for more patience than
    /// an app in the foreground has): the credential waits for the next launch.
    public var longestDelay: Duration

    public init(tries: Int = 4, firstDelay: Duration = .seconds(1), longestDelay: Duration = .seconds(30)) {
        precondition(tries >= 1, "at least one try")
        self.tries = tries
        self.firstDelay = firstDelay
        self.longestDelay = longestDelay
    }

    /// The wait before try `failures + 1`, after `failures` failed ones; nil when the round is over.
    func delay(afterFailures failures: Int, retryAfter: Duration?) -> Duration? {
        guard failures < tries else { return nil }
        if let retryAfter { return retryAfter <= longestDelay ? retryAfter : nil }
        let doubled = firstDelay * (1 << min(failures - 1, 30))
        return min(doubled, longestDelay)
    }
}
