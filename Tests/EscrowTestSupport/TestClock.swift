public import EscrowCore
public import Foundation
import NIOConcurrencyHelpers

/// The system clock moved by an offset the test sets: escrows captured "two minutes ago", a lease or a
/// retry schedule run past its end, retention elapsed, without waiting for real time to pass.
public final class TestClock: WallClock {
    private let offsetSeconds = NIOLockedValueBox<Double>(0)

    public init() {}

    public func now() -> Date { Date().addingTimeInterval(offset) }

    /// Seconds added to the system time.
    public var offset: Double {
        get { offsetSeconds.withLockedValue { $0 } }
        set { offsetSeconds.withLockedValue { $0 = newValue } }
    }

    /// Moves the clock forward.
    public func advance(by seconds: Double) {
        offsetSeconds.withLockedValue { $0 += seconds }
    }

    /// Runs `body` with the clock `seconds` in the past, then puts it back.
    public func past<T>(_ seconds: Double, _ body: () async throws -> T) async rethrows -> T {
        let saved = offset
        offset = saved - seconds
        defer { offset = saved }
        return try await body()
    }
}
