import EscrowCore
import Testing

@Suite("Retry policy")
struct RetryPolicyTests {
    let policy = RetryPolicy(maxAttempts: 10, base: 1, cap: 60)

    @Test(arguments: [(1, 1.0), (2, 2.0), (3, 4.0), (6, 32.0), (7, 60.0), (40, 60.0), (500, 60.0)])
    func ceilingDoublesThenCaps(attempt: Int, ceiling: Double) {
        #expect(policy.ceiling(afterAttempt: attempt) == ceiling)
    }

    @Test func fullJitterSpansZeroToTheCeiling() {
        #expect(policy.delay(afterAttempt: 4, retryAfter: nil, unitRandom: 0) == 0)
        #expect(policy.delay(afterAttempt: 4, retryAfter: nil, unitRandom: 1) == 8)
        #expect(policy.delay(afterAttempt: 4, retryAfter: nil, unitRandom: 0.25) == 2)
        #expect(policy.delay(afterAttempt: 4, retryAfter: nil, unitRandom: 7) == 8, "out-of-range randoms are clamped")
    }

    @Test func retryAfterWinsButIsCapped() {
        #expect(policy.delay(afterAttempt: 1, retryAfter: 30, unitRandom: 0) == 30)
        #expect(policy.delay(afterAttempt: 1, retryAfter: 3600, unitRandom: 0) == 60)
        #expect(policy.delay(afterAttempt: 9, retryAfter: 0, unitRandom: 1) == 0)
    }
}
