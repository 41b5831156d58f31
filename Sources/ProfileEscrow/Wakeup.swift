import NIOConcurrencyHelpers

/// A doorbell for one waiter: ``wait(seconds:)`` returns when ``signal()`` rings or the time is up,
/// whichever comes first. A ring with nobody waiting is kept for the next wait, so a signal between
/// "check" and "wait" is never lost. Spurious wake-ups are possible; callers re-check their state.
final class Wakeup: Sendable {
    private struct State {
        var rung = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = NIOLockedValueBox(State())

    func signal() {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.rung = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    func wait(seconds: Double) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // Always rings at the end, cancelled or not, so the other child below always ends.
                try? await Task.sleep(for: .milliseconds(Int64(max(0, seconds) * 1000)))
                self.signal()
            }
            group.addTask { await self.waitForRing() }
            await group.next()
            group.cancelAll()
            await group.waitForAll()
        }
        // Whatever rang during the wait woke it; the caller re-checks its state next.
        state.withLockedValue { $0.rung = false }
    }

    private func waitForRing() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLockedValue { state -> Bool in
                if state.rung {
                    state.rung = false
                    return true
                }
                state.waiter = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }
}
