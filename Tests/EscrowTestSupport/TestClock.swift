public import EscrowCore
public import Foundation
import NIOConcurrencyHelpers

/// The system clock moved by an offset the test sets: escrows captured "two minutes ago", a lease or a
/// retry schedule run past its end, retention elapsed, without waiting for real time to pass. Waits on
/// this clock (``sleep(for:)``: a flush or reload interval, a key cycle's grace) end when the test moves
/// the clock past their end, never by themselves.
///
/// Its timers (``makeTimer(_:)``: the replay worker's waits between claims) come due as its time does: when the
/// test moves the clock past them, or when real time reaches them (this clock moves with real time). So a running
/// worker waiting for a retry due in an hour runs it as soon as the test advances the clock by an hour.
public final class TestClock: WallClock {
    private struct Sleeper {
        var id: Int
        /// The offset at which the wait ends.
        var end: Double
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var offset: Double = 0
        var sleepers: [Sleeper] = []
        /// Scheduled timers: when each comes due (in this clock's time) and what it runs.
        var timers: [Int: (due: Date, action: @Sendable () -> Void)] = [:]
        var nextID = 0
    }

    private let state = NIOLockedValueBox(State())

    public init() {}

    public func now() -> Date { Date().addingTimeInterval(offset) }

    /// Seconds added to the system time. Setting it wakes the waits it moved past.
    public var offset: Double {
        get { state.withLockedValue { $0.offset } }
        set { move { $0 = newValue } }
    }

    /// How many waits on this clock have not ended yet.
    public var sleeping: Int { state.withLockedValue { $0.sleepers.count } }

    /// Moves the clock forward, waking the waits that end by then.
    public func advance(by seconds: Double) {
        move { $0 += seconds }
    }

    /// Runs `body` with the clock `seconds` in the past, then puts it back.
    public func past<T>(_ seconds: Double, _ body: () async throws -> T) async rethrows -> T {
        let saved = offset
        offset = saved - seconds
        defer { offset = saved }
        return try await body()
    }

    public func sleep(for duration: Duration) async throws {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
        guard seconds > 0 else { return try Task.checkCancellation() }
        let id = state.withLockedValue { state -> Int in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let cancelled = state.withLockedValue { state -> Bool in
                    if Task.isCancelled { return true }
                    state.sleepers.append(Sleeper(id: id, end: state.offset + seconds, continuation: continuation))
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let sleeper = state.withLockedValue { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    public func makeTimer(_ action: @escaping @Sendable () -> Void) -> any WallClockTimer {
        let id = state.withLockedValue { state -> Int in
            defer { state.nextID += 1 }
            return state.nextID
        }
        return Timer(clock: self, id: id, action: action)
    }

    /// Changes the offset, then resumes (outside the lock) the waits that ended and runs the timers that came due.
    private func move(_ change: (inout Double) -> Void) {
        let (woken, due) = state.withLockedValue { state -> ([Sleeper], [@Sendable () -> Void]) in
            change(&state.offset)
            let offset = state.offset
            let woken = state.sleepers.filter { $0.end <= offset }
            state.sleepers.removeAll { $0.end <= offset }
            let now = Date().addingTimeInterval(offset)
            let due = state.timers.filter { $0.value.due <= now }
            for id in due.keys { state.timers[id] = nil }
            return (woken, due.values.map(\.action))
        }
        for sleeper in woken { sleeper.continuation.resume() }
        for action in due { action() }
    }

    /// Runs timer `id`'s action if it is still scheduled (it runs once per schedule).
    private func fire(_ id: Int) {
        let action = state.withLockedValue { state in
            defer { state.timers[id] = nil }
            return state.timers[id]?.action
        }
        action?()
    }

    /// A timer of a ``TestClock``: due when the clock is moved past its end or real time reaches it.
    private final class Timer: WallClockTimer, Sendable {
        private let clock: TestClock
        private let id: Int
        private let action: @Sendable () -> Void
        /// The real-time side: the system clock's own re-armable timer.
        private let realTime: any WallClockTimer

        init(clock: TestClock, id: Int, action: @escaping @Sendable () -> Void) {
            self.clock = clock
            self.id = id
            self.action = action
            realTime = SystemWallClock().makeTimer { [clock, id] in clock.fire(id) }
        }

        deinit {
            cancel()
        }

        func schedule(after duration: Duration) {
            let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
            let action = action
            let due = clock.now().addingTimeInterval(seconds)
            clock.state.withLockedValue { $0.timers[id] = (due, action) }
            realTime.schedule(after: duration)
        }

        func cancel() {
            realTime.cancel()
            clock.state.withLockedValue { $0.timers[id] = nil }
        }
    }
}
