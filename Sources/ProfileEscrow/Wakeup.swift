import EscrowCore
import NIOConcurrencyHelpers

/// A doorbell for one waiter: ``wait(seconds:)`` returns when ``signal()`` rings, the time is up on the escrow's
/// clock, or the waiting task is cancelled, whichever comes first. A ring with nobody waiting is kept for the next
/// wait, which then returns at once, so a signal between "check" and "wait" is never lost. Spurious wake-ups are
/// possible (a timer that fired for an earlier wait as a later one began); callers re-check their state.
///
/// Written on a continuation and one re-armed timer of the clock (``WallClock/makeTimer(_:)``) rather than a task
/// group racing `Task.sleep`: the replay loop waits here once or twice per delivery, and every `Task.sleep` leaves its
/// own timer queued until its full time is up, even when a ring ended the wait long before. On a test clock, moving
/// the clock past a wait's end ends it.
final class Wakeup: Sendable {
    private struct State {
        var rung = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = NIOLockedValueBox(State())
    private let timer = NIOLockedValueBox<(any WallClockTimer)?>(nil)

    init(clock: any WallClock) {
        let made = clock.makeTimer { [weak self] in self?.expire() }
        timer.withLockedValue { $0 = made }
    }

    deinit {
        timer.withLockedValue { $0?.cancel() }
    }

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
        let rung = state.withLockedValue { state -> Bool in
            defer { state.rung = false }
            return state.rung
        }
        if rung || Task.isCancelled { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let waiting = state.withLockedValue { state -> Bool in
                    if state.rung {
                        state.rung = false
                        return false
                    }
                    state.waiter = continuation
                    return true
                }
                guard waiting else { return continuation.resume() }
                let milliseconds = Int64(min(max(0, seconds), 3600) * 1_000)
                timer.withLockedValue { $0?.schedule(after: .milliseconds(milliseconds)) }
            }
        } onCancel: {
            signal()
        }
    }

    private func expire() {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }
}
