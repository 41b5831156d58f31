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
}

/// The system's wall clock; its waits are in real (monotonic) time.
public struct SystemWallClock: WallClock {
    public init() {}

    public func now() -> Date { Date() }

    public func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }
}
