import Logging
import NIOConcurrencyHelpers
import Testing

@testable import EscrowHTTP

/// Apple's background work (code exchanges, revocations) works a claimed batch side by side: one request at a time,
/// a node would redeem a handful of codes a second against Apple's real latency, and a burst of sign-ins would
/// outlive its five-minute codes.
@Suite("Apple's claim loop")
struct AppleClaimLoopTests {
    @Test("a claimed batch is worked side by side, and counted once all of it is done")
    func batchIsWorkedSideBySide() async throws {
        let items = Array(1...6)
        let inFlight = NIOLockedValueBox((now: 0, most: 0, done: 0))
        let claimed = await AppleClaimLoop.batch("test items", logger: Logger(label: "test")) {
            items
        } work: { _ in
            inFlight.withLockedValue {
                $0.now += 1
                $0.most = max($0.most, $0.now)
            }
            // Each item waits (at most 5 s) until every item of the batch has started: worked one at a time, the
            // first would wait alone and the most in flight would stay 1.
            let deadline = ContinuousClock.now + .seconds(5)
            while inFlight.withLockedValue({ $0.most }) < items.count, ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(5))
            }
            inFlight.withLockedValue {
                $0.now -= 1
                $0.done += 1
            }
        }
        #expect(claimed == items.count)
        let state = inFlight.withLockedValue { $0 }
        #expect(state.most == items.count, "all of the batch in flight at once: \(state.most)")
        #expect(state.done == items.count, "every item done before the batch returns")
    }

    @Test("a claim that fails is logged and counts none")
    func failedClaimCountsNone() async {
        struct Failure: Error {}
        let worked = NIOLockedValueBox(0)
        let claimed = await AppleClaimLoop.batch("test items", logger: Logger(label: "test")) { () -> [Int] in
            throw Failure()
        } work: { _ in
            worked.withLockedValue { $0 += 1 }
        }
        #expect(claimed == 0)
        #expect(worked.withLockedValue { $0 } == 0)
    }
}
