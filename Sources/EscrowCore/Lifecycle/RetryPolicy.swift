/// When to try a delivery again: `Retry-After` when the backend sent one, otherwise
/// exponential backoff with full jitter, capped; and how many attempts before giving up.
public struct RetryPolicy: Sendable, Equatable {
    /// Attempts (deliveries started) before a retryable failure makes the escrow `dead`.
    public var maxAttempts: Int
    /// The first backoff ceiling, in seconds.
    public var base: Double
    /// The largest delay ever waited, in seconds, `Retry-After` included.
    public var cap: Double

    public init(maxAttempts: Int = 50, base: Double = 1, cap: Double = 3600) {
        self.maxAttempts = maxAttempts
        self.base = base
        self.cap = cap
    }

    /// The ceiling of the jittered delay after the `attempt`-th failed attempt (1-based):
    /// `min(cap, base * 2^(attempt-1))`.
    public func ceiling(afterAttempt attempt: Int) -> Double {
        let exponent = Double(max(0, min(attempt - 1, 62)))
        return min(cap, base * pow2(exponent))
    }

    /// The delay before the next attempt, in seconds.
    /// - Parameters:
    ///   - attempt: how many attempts have been made (1 after the first failure).
    ///   - retryAfter: the backend's `Retry-After`, in seconds, if it sent one.
    ///   - unitRandom: a uniform random number in `0...1` (injected so tests can pin it).
    public func delay(afterAttempt attempt: Int, retryAfter: Double?, unitRandom: Double) -> Double {
        if let retryAfter, retryAfter >= 0 {
            return min(cap, retryAfter)
        }
        return ceiling(afterAttempt: attempt) * min(1, max(0, unitRandom))
    }

    private func pow2(_ exponent: Double) -> Double {
        var result = 1.0
        var remaining = Int(exponent)
        while remaining > 0 {
            result *= 2
            remaining -= 1
        }
        return result
    }
}
