import Dispatch
import NIOConcurrencyHelpers

/// A doorbell for one waiter: ``wait(seconds:)`` returns when ``signal()`` rings, the time is up, or
/// the waiting task is cancelled, whichever comes first. A ring with nobody waiting is kept for the next
/// wait, which then returns at once, so a signal between "check" and "wait" is never lost. Spurious
/// wake-ups are possible; callers re-check their state.
///
/// Written on a continuation and one re-armed dispatch timer rather than a task group racing
/// `Task.sleep`: the replay loop waits here once or twice per delivery, and every `Task.sleep` leaves its
/// own timer queued in Dispatch until its full time is up, even when a ring ended the wait long before.
final class Wakeup: Sendable {
    private struct State {
        var rung = false
        var waiter: CheckedContinuation<Void, Never>?
        /// When the current wait times out.
        var deadline = DispatchTime.distantFuture
    }

    private let state = NIOLockedValueBox(State())
    /// Re-armed by every wait; its firing for an earlier wait's deadline ends nothing. Dispatch sources are
    /// thread-safe; the type is not marked Sendable on Linux.
    private nonisolated(unsafe) let timer: any DispatchSourceTimer

    init() {
        timer = DispatchSource.makeTimerSource(queue: .global())
        timer.setEventHandler { [weak self] in self?.expire() }
        timer.schedule(deadline: .distantFuture)
        timer.activate()
    }

    deinit {
        timer.cancel()
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
                let deadline = DispatchTime.now() + .nanoseconds(Int(min(max(0, seconds), 3600) * 1_000_000_000))
                let waiting = state.withLockedValue { state -> Bool in
                    if state.rung {
                        state.rung = false
                        return false
                    }
                    state.waiter = continuation
                    state.deadline = deadline
                    return true
                }
                guard waiting else { return continuation.resume() }
                timer.schedule(deadline: deadline)
            }
        } onCancel: {
            signal()
        }
    }

    private func expire() {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter, DispatchTime.now() >= state.deadline else { return nil }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }
}
