public import Foundation

/// Where the lifecycle, the worker and the sweeps read the time: injected, so retry schedules,
/// leases and retention are tested by moving a clock instead of waiting.
///
/// Wall-clock time (a `Date`), not a monotonic instant: escrow times are stored, compared across
/// processes and nodes, and shown to auditors.
public protocol WallClock: Sendable {
    func now() -> Date
}

/// The system's wall clock.
public struct SystemWallClock: WallClock {
    public init() {}

    public func now() -> Date { Date() }
}
