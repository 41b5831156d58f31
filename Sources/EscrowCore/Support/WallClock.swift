import Dispatch
public import Foundation

/// The escrow's clock: where the lifecycle, the worker, the sweeps and the HTTP routes read the time, and
/// where the escrow's services wait (flush, reload and refresh intervals, a key cycle's grace, the drain
/// delay). Injected, so retry schedules, leases, retention and intervals are tested by moving a clock
/// instead of waiting.
///
/// Wall-clock time (a `Date`), not a monotonic instant: escrow times are stored, compared across
/// processes and nodes, and shown to auditors. Waits are durations, counted as this clock counts them.
public protocol WallClock: Sendable {
    func now() -> Date

    /// Suspends for `duration` as this clock counts time; throws `CancellationError` when the task is
    /// cancelled first.
    func sleep(for duration: Duration) async throws

    /// A timer on this clock that runs `action` each time a ``WallClockTimer/schedule(after:)`` comes due: what the
    /// replay worker's doorbell waits on between deliveries (``sleep(for:)`` leaves each wait's timer queued until
    /// its full time is up, even when the wait ended long before: thousands a second under load). The default runs
    /// each schedule as a task sleeping on this clock.
    func makeTimer(_ action: @escaping @Sendable () -> Void) -> any WallClockTimer
}

/// A re-armable timer of a ``WallClock``: one schedule at a time, each replacing the one before.
public protocol WallClockTimer: Sendable {
    /// Runs the timer's action once `duration` has passed on its clock, instead of at the previous schedule.
    func schedule(after duration: Duration)
    /// Drops the schedule; the action does not run again.
    func cancel()
}

extension WallClock {
    public func makeTimer(_ action: @escaping @Sendable () -> Void) -> any WallClockTimer {
        SleepingTimer(clock: self, action: action)
    }
}

/// A timer for any clock: each schedule is a task that sleeps on the clock, cancelled by the next schedule.
private final class SleepingTimer<Clock: WallClock>: WallClockTimer, @unchecked Sendable {
    private let clock: Clock
    private let action: @Sendable () -> Void
    private let lock = NSLock()
    private var task: Task<Void, Never>?

    init(clock: Clock, action: @escaping @Sendable () -> Void) {
        self.clock = clock
        self.action = action
    }

    func schedule(after duration: Duration) {
        let clock = clock
        let action = action
        let next = Task {
            guard (try? await clock.sleep(for: duration)) != nil else { return }
            action()
        }
        lock.withLock {
            task?.cancel()
            task = next
        }
    }

    func cancel() {
        lock.withLock {
            task?.cancel()
            task = nil
        }
    }
}

/// The system's wall clock; its waits are in real (monotonic) time.
public struct SystemWallClock: WallClock {
    public init() {}

    public func now() -> Date { Date() }

    public func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }

    /// One dispatch timer, re-armed by each schedule, so a wait that ended early leaves nothing queued.
    public func makeTimer(_ action: @escaping @Sendable () -> Void) -> any WallClockTimer {
        DispatchTimer(action)
    }
}

/// A dispatch timer source re-armed by each schedule (real, monotonic time).
private final class DispatchTimer: WallClockTimer, Sendable {
    /// Dispatch sources are thread-safe; the type is not marked Sendable on Linux.
    private nonisolated(unsafe) let timer: any DispatchSourceTimer

    init(_ action: @escaping @Sendable () -> Void) {
        timer = DispatchSource.makeTimerSource(queue: .global())
        timer.setEventHandler(handler: action)
        timer.schedule(deadline: .distantFuture)
        timer.activate()
    }

    deinit { timer.cancel() }

    func schedule(after duration: Duration) {
        let nanoseconds = duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
        timer.schedule(deadline: .now() + .nanoseconds(Int(max(0, min(nanoseconds, 3_600_000_000_000)))))
    }

    func cancel() { timer.schedule(deadline: .distantFuture) }
}
