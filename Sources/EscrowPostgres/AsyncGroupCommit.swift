import NIOConcurrencyHelpers

/// Group commit without a thread of its own: concurrent writes of one node (captures; lifecycle actions)
/// share one transaction, and every caller is answered only after that transaction's COMMIT returned.
///
/// The first caller to find no batch in flight leads: it takes its own item and whatever is queued (up to
/// ``maximumBatch``), writes them as one batch in its own task, answers the others, and hands the lead to
/// the oldest caller still waiting, whose task writes the next batch. So while one COMMIT waits for the
/// server's WAL flush, the captures arriving meanwhile gather into the next one, and no task ever runs
/// beyond its caller's own work. One batch is in flight per node at a time: appends to the audit chain
/// serialize on its head row anyway.
final class AsyncGroupCommit<Item: Sendable, Output: Sendable>: Sendable {
    /// Writes one batch; returns one result per item, in order.
    typealias Writer = @Sendable ([Item]) async -> [Result<Output, any Error>]

    private enum Signal: Sendable {
        case done(Result<Output, any Error>)
        case lead
    }

    private struct Waiting: Sendable {
        let item: Item
        let continuation: CheckedContinuation<Signal, Never>
    }

    private struct State {
        var waiting: [Waiting] = []
        var leading = false
    }

    let maximumBatch: Int
    /// The most a caller waits, from its call, for its batch to commit: the batch written for the oldest caller
    /// ends by that caller's deadline (``StoreDatabase/callerDeadline``, inherited by the batch's task), so a caller
    /// queued behind a batch stuck on a dead connection is not given a bound of its own on top of it.
    let bound: Duration
    private let state = NIOLockedValueBox(State())
    private let write: Writer

    init(maximumBatch: Int = 256, bound: Duration = .seconds(5), write: @escaping Writer) {
        precondition(maximumBatch > 0)
        self.maximumBatch = maximumBatch
        self.bound = bound
        self.write = write
    }

    /// Writes `item` in the next batch and returns its result once that batch is committed.
    func submit(_ item: Item) async throws -> Output {
        let deadline = StoreDatabase.callerDeadline ?? ContinuousClock.now + bound
        return try await StoreDatabase.$callerDeadline.withValue(deadline) { try await queue(item) }
    }

    private func queue(_ item: Item) async throws -> Output {
        let leads = state.withLockedValue { state in
            if state.leading { return false }
            state.leading = true
            return true
        }
        if !leads {
            let signal = await withCheckedContinuation { (continuation: CheckedContinuation<Signal, Never>) in
                let leadNow = state.withLockedValue { state in
                    if state.leading {
                        state.waiting.append(Waiting(item: item, continuation: continuation))
                        return false
                    }
                    state.leading = true
                    return true
                }
                // The leader finished between the two checks: this caller leads.
                if leadNow { continuation.resume(returning: .lead) }
            }
            if case .done(let result) = signal { return try result.get() }
        }
        return try await lead(with: item).get()
    }

    private func lead(with item: Item) async -> Result<Output, any Error> {
        let others = state.withLockedValue { state in
            let taken = Array(state.waiting.prefix(maximumBatch - 1))
            state.waiting.removeFirst(taken.count)
            return taken
        }
        // In a task of its own: cancelling the leading caller's task (a client that went away) must not fail
        // the batch it writes for everyone else.
        let write = write
        let batch = [item] + others.map(\.item)
        let results = await Task { await write(batch) }.value
        for (waiting, result) in zip(others, results.dropFirst()) {
            waiting.continuation.resume(returning: .done(result))
        }
        // Hand the lead to the oldest caller still waiting, or give it up.
        let next = state.withLockedValue { state -> Waiting? in
            guard !state.waiting.isEmpty else {
                state.leading = false
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.continuation.resume(returning: .lead)
        return results.first ?? .failure(CancellationError())
    }
}
