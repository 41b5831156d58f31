/// A condition that did not hold, or an operation that did not end, in time.
public struct TimedOut: Error, CustomStringConvertible {
    public var what: String

    public init(what: String) { self.what = what }

    public var description: String { "timed out waiting for \(what)" }
}

/// Polls `condition` every `interval` until it holds; fails with ``TimedOut`` (instead of hanging) after
/// `seconds`. The condition is checked once more at the deadline, so a slow last poll still counts.
public func eventually(
    _ what: String,
    within seconds: Double = 60,
    every interval: Duration = .milliseconds(20),
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw TimedOut(what: what) }
        try await pause(for: interval)
    }
}

/// Runs `operation`, failing with ``TimedOut`` (and cancelling it) after `seconds`.
public func bounded<T: Sendable>(
    _ what: String,
    within seconds: Double = 60,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await pause(for: .milliseconds(Int64(seconds * 1000)))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else { throw TimedOut(what: what) }
        return value
    }
}
