package import Dispatch
package import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// Group commit, for every store: concurrent writes (captures; lifecycle actions such as delivery outcomes) share
/// one write transaction, and so one fsync or one WAL flush, while every caller still gets its answer only after that
/// transaction is durable.
///
/// The first caller to find no batch in progress starts a drain; the drain takes what is queued (up to
/// ``maximumBatch``), writes it with the store's batch writer, resumes every caller of that batch, and repeats until
/// the queue is empty. A writer writes a batch in one transaction; when an item fails, the store writes each item of
/// that batch again in its own transaction (``StoreEngine/writeBatch(_:transaction:_:)``), so one failing item does
/// not fail the others. Callers seal their profiles and classify their deliveries before they queue, so that work
/// runs in parallel with the writer. One drain runs at a time per store: appends to the audit chain serialize on its
/// head anyway.
///
/// What differs between stores is only where the drain runs (``Writer``): a store whose writes block in the calling
/// thread (SQLite) drains on a serial dispatch queue of its own; a store whose writes are asynchronous I/O
/// (PostgreSQL) drains in a task of its own. Either way a caller's cancellation (a client that went away) never fails
/// the batch written for everyone else.
///
/// Inlinable: the stores are other modules, and an unspecialized generic drain (its items and continuations moved
/// through generic metadata) cost replay about a fifth of its throughput.
package final class GroupCommit<Item: Sendable, Output: Sendable>: Sendable {
    @usableFromInline
    package typealias Results = [Result<Output, any Error>]

    /// How the store writes a batch; returns one result per item, in order.
    @usableFromInline
    package enum Writer: Sendable {
        /// Writes that block the calling thread (SQLite). The drain runs on a serial dispatch queue, blocking there:
        /// as a Swift task it would wait in the cooperative pool behind every capture still sealing, and commits
        /// would start only once the sealing was done (measured: 1.1 of 2 cores busy under 1,000 concurrent
        /// captures). Under load it gathers captures for fuller commits (``maximumGather``).
        case blocking(label: String, write: @Sendable ([Item]) -> Results)
        /// Blocking writes under the deadline of the batch's oldest caller (a web sign-in's callback, whose browser
        /// must get its answer within seconds): the writer waits for its locks until then at most.
        case blockingUntil(label: String, write: @Sendable ([Item], _ deadline: ContinuousClock.Instant) -> Results)
        /// Writes that are asynchronous I/O (PostgreSQL). The drain runs in a task; a batch is written under the
        /// deadline of its oldest caller, so a caller queued behind a batch stuck on a dead connection is not given
        /// a bound of its own on top of it. While one COMMIT waits for the server, the captures arriving meanwhile
        /// gather into the next one: no extra wait is needed.
        case async(write: @Sendable ([Item], _ deadline: ContinuousClock.Instant) async -> Results)
    }

    @usableFromInline
    struct Waiting: Sendable {
        @usableFromInline let item: Item
        @usableFromInline let deadline: ContinuousClock.Instant
        @usableFromInline let continuation: CheckedContinuation<Output, any Error>

        @inlinable
        init(item: Item, deadline: ContinuousClock.Instant, continuation: CheckedContinuation<Output, any Error>) {
            self.item = item
            self.deadline = deadline
            self.continuation = continuation
        }
    }

    @usableFromInline
    struct State: Sendable {
        @usableFromInline var pending: [Waiting] = []
        @usableFromInline var draining = false

        @inlinable
        init() {}
    }

    /// The most items written in one transaction.
    @usableFromInline let maximumBatch: Int
    /// The most a caller waits, from its call, for its batch to commit, unless it brings a deadline of its own.
    package let bound: Duration
    /// Under load (captures arrived during the previous commit), a blocking drain waits for more before its next
    /// commit in steps of ``gatherStep`` as long as captures keep arriving, and at most ``maximumGather`` in all.
    /// Every commit has a fixed cost (its fsync; the ends of the tables, the interior pages and the audit head
    /// written again), so under a burst fewer, fuller commits leave more CPU to sealing. A lone capture never waits,
    /// nor does the first of a burst.
    @usableFromInline let gatherStep: Duration = .microseconds(250)
    @usableFromInline let maximumGather: Duration = .milliseconds(2)

    @usableFromInline let state: NIOLockedValueBox<State>
    /// Where the drain runs: on its own serial queue with the blocking writer, or in a task with the asynchronous one.
    @usableFromInline
    enum Drain: Sendable {
        case queue(DispatchQueue, @Sendable ([Item], ContinuousClock.Instant) -> Results)
        case task(@Sendable ([Item], ContinuousClock.Instant) async -> Results)
    }

    @usableFromInline let drain: Drain

    package init(maximumBatch: Int = 256, bound: Duration = .seconds(5), writer: Writer) {
        precondition(maximumBatch > 0)
        self.maximumBatch = maximumBatch
        self.bound = bound
        self.state = NIOLockedValueBox(State())
        switch writer {
        case .blocking(let label, let write): drain = .queue(DispatchQueue(label: label)) { items, _ in write(items) }
        case .blockingUntil(let label, let write): drain = .queue(DispatchQueue(label: label), write)
        case .async(let write): drain = .task(write)
        }
    }

    /// Items queued and not yet taken by a commit.
    package var queuedCount: Int { state.withLockedValue { $0.pending.count } }

    /// Queues one item and waits until the batch that holds it is committed; `deadline` bounds an asynchronous or a
    /// ``Writer/blockingUntil(label:write:)`` writer's batch (by default, ``bound`` from now).
    @inlinable
    package func submit(_ item: Item, deadline: ContinuousClock.Instant? = nil) async throws -> Output {
        let deadline = deadline ?? ContinuousClock.now + bound
        return try await withCheckedThrowingContinuation { continuation in
            let startDrain = state.withLockedValue { state -> Bool in
                state.pending.append(Waiting(item: item, deadline: deadline, continuation: continuation))
                guard !state.draining else { return false }
                state.draining = true
                return true
            }
            guard startDrain else { return }
            switch drain {
            case .queue(let queue, let write):
                queue.async {
                    DrainScheduling.draining {
                        var round = 0
                        while let batch = self.nextBatch(gather: round > 0) {
                            round += 1
                            self.answer(batch, write(batch.map(\.item), batch[0].deadline))
                        }
                    }
                }
            case .task(let write):
                Task {
                    while let batch = self.nextBatch(gather: false) {
                        self.answer(batch, await write(batch.map(\.item), batch[0].deadline))
                    }
                }
            }
        }
    }

    /// The next batch, oldest first; nil (and the drain ends) when none is queued.
    @inlinable
    func nextBatch(gather: Bool) -> [Waiting]? {
        if gather { self.gather() }
        return state.withLockedValue { state -> [Waiting]? in
            let batch = Array(state.pending.prefix(maximumBatch))
            state.pending.removeFirst(batch.count)
            guard !batch.isEmpty else {
                state.draining = false
                return nil
            }
            return batch
        }
    }

    @inlinable
    func answer(_ batch: [Waiting], _ results: Results) {
        for (index, waiting) in batch.enumerated() {
            // A writer owes one result per item; a missing one fails its caller rather than leaving it waiting.
            waiting.continuation.resume(with: index < results.count ? results[index] : .failure(CancellationError()))
        }
    }

    /// Blocks the drain's thread while captures keep arriving: returns at once when none is queued, after a step in
    /// which none arrived, when a full batch is queued, or after ``maximumGather``.
    @inlinable
    func gather() {
        var queued = state.withLockedValue { $0.pending.count }
        guard queued > 0 else { return }
        let start = ContinuousClock.now
        let stepMicroseconds = UInt32(gatherStep.components.attoseconds / 1_000_000_000_000)
        while queued < maximumBatch, ContinuousClock.now - start < maximumGather {
            usleep(stepMicroseconds)
            let now = state.withLockedValue { $0.pending.count }
            if now == queued { return }
            queued = now
        }
    }
}

/// The group commit of captures.
package typealias CaptureBatcher = GroupCommit<CaptureItem, CaptureOutcome>

/// The group commit of lifecycle actions (delivery outcomes, confirmations, purges…): whether each was applied.
package typealias CommitBatcher = GroupCommit<CommitItem, Bool>
