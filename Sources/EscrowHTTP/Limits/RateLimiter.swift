import EscrowCore
import Hummingbird
import NIOConcurrencyHelpers

/// In-memory token buckets by key: one per token name for the token-guarded routes (bounded by the number of tokens),
/// or one per route and client for the token-less ones (bounded by ``capacity``; see ``ClientRateLimiter``).
final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    private struct State {
        var buckets: [String: Bucket] = [:]
        /// When a full map was last cleared of its full buckets: at most once a second, so that a flood of new keys
        /// does not walk the whole map at each one.
        var lastClearing: ContinuousClock.Instant?
    }

    let limit: RateLimit
    /// The most keys held at once. A new key past it, when no bucket has refilled, is answered as over its limit
    /// (`acquire` returns a wait) rather than growing the map: the caller's overall limit still lets real clients in.
    let capacity: Int
    private let state = NIOLockedValueBox(State())

    init(limit: RateLimit, capacity: Int = .max) {
        self.limit = limit
        self.capacity = capacity
    }

    /// Takes one request from `key`'s bucket. Returns nil when allowed, otherwise the seconds to wait.
    func acquire(_ key: String, now: ContinuousClock.Instant = .now) -> Int? {
        state.withLockedValue { state in
            var bucket: Bucket
            if let held = state.buckets[key] {
                bucket = held
            } else {
                guard makeRoom(&state, now: now) else { return 1 }
                bucket = Bucket(tokens: limit.burst, updated: now)
            }
            let seconds = (now - bucket.updated).inSeconds
            bucket.tokens = min(limit.burst, bucket.tokens + seconds * limit.requestsPerSecond)
            bucket.updated = now
            defer { state.buckets[key] = bucket }
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                return nil
            }
            let wait = (1 - bucket.tokens) / max(limit.requestsPerSecond, 1e-9)
            return max(1, Int(wait.rounded(.up)))
        }
    }

    /// Whether a new key fits: below ``capacity``, or once the buckets that have refilled since their last request
    /// (the same as a new one) have left, at most once a second.
    private func makeRoom(_ state: inout State, now: ContinuousClock.Instant) -> Bool {
        guard state.buckets.count >= capacity else { return true }
        if let last = state.lastClearing, now - last < .seconds(1) { return false }
        state.lastClearing = now
        let refill = limit.burst / max(limit.requestsPerSecond, 1e-9)
        state.buckets = state.buckets.filter { (now - $0.value.updated).inSeconds < refill }
        return state.buckets.count < capacity
    }

    /// How many keys are held (for tests).
    var count: Int { state.withLockedValue { $0.buckets.count } }
}
