/// What a caller built and must undo: each step added right after the thing it undoes is made, all of them run once,
/// the last added first, when the body ends, whether it returned or threw. The one place a server releases what it
/// holds, so that a failure cannot skip a step (as an early `throw` past a hand-written list of closes would).
struct Teardown {
    private var steps: [@Sendable () async throws -> Void] = []

    /// Undoes something after everything added later is undone.
    mutating func add(_ step: @escaping @Sendable () async throws -> Void) {
        steps.append(step)
    }

    /// Runs `body`, then every step added, last first. Every step runs even when one before it throws; the body's
    /// error wins, else the first step's error is thrown.
    static func run<Result: Sendable>(_ body: (inout Teardown) async throws -> Result) async throws -> Result {
        var teardown = Teardown()
        let result: Result
        do {
            result = try await body(&teardown)
        } catch {
            _ = await teardown.undo()
            throw error
        }
        if let failure = await teardown.undo() { throw failure }
        return result
    }

    /// Runs the steps, last first; the first error met, if any.
    private func undo() async -> (any Error)? {
        var failure: (any Error)?
        for step in steps.reversed() {
            do {
                try await step()
            } catch {
                failure = failure ?? error
            }
        }
        return failure
    }
}
