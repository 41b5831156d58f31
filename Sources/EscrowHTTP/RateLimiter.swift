import EscrowCore
import Hummingbird
import NIOConcurrencyHelpers

/// In-memory token buckets, one per token name (so bounded by the number of tokens), or one per route for
/// requests without a token.
final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    let limit: RateLimit
    private let buckets = NIOLockedValueBox<[String: Bucket]>([:])

    init(limit: RateLimit) {
        self.limit = limit
    }

    /// Takes one request from `key`'s bucket. Returns nil when allowed, otherwise the seconds to wait.
    func acquire(_ key: String, now: ContinuousClock.Instant = .now) -> Int? {
        buckets.withLockedValue { buckets in
            var bucket = buckets[key] ?? Bucket(tokens: limit.burst, updated: now)
            let elapsed = now - bucket.updated
            let seconds = elapsed.inSeconds
            bucket.tokens = min(limit.burst, bucket.tokens + seconds * limit.requestsPerSecond)
            bucket.updated = now
            defer { buckets[key] = bucket }
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                return nil
            }
            let wait = (1 - bucket.tokens) / max(limit.requestsPerSecond, 1e-9)
            return max(1, Int(wait.rounded(.up)))
        }
    }

    /// Takes one request from `key`'s bucket, or throws `429` with `Retry-After`.
    func admit(_ key: String) throws {
        if let wait = acquire(key) {
            throw Problem(
                .tooManyRequests,
                code: "rate_limited",
                detail: "too many requests; retry later",
                headers: [.retryAfter: "\(wait)"]
            )
        }
    }
}
