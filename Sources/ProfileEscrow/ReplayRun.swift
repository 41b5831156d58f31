import EscrowCore
import EscrowCrypto
import Foundation
import NIOConcurrencyHelpers

/// The shared state of one ``ReplayWorker`` run: the shutdown flag, deliveries in flight and outcomes
/// being committed, the summary so far, and the doorbell the run loop sleeps on.
///
/// A delivery holds a slot of the worker's concurrency only while its request is out: once the backend has
/// answered, it frees the slot and waits for its outcome's group commit (`committing`). So the
/// backend sees `concurrency` requests at a time even while the store is making outcomes durable. (Measured with
/// the slot held through the commit: 2,800 purges/s through 64 slots, 23 ms a cycle, of which the request took
/// about 1 ms.)
final class ReplayRun: Sendable {
    struct State {
        var shuttingDown = false
        /// Requests out to the backend.
        var inFlight = 0
        /// Answered deliveries whose outcome is being committed.
        var committing = 0
        var summary = ReplaySummary()
        /// Claimed escrows known to have no Apple token exchange: their deliveries read none.
        var withoutAppleExchanges: Set<EscrowID> = []
    }

    private let state = NIOLockedValueBox(State())
    let wakeup: Wakeup
    /// The worker's concurrency: requests out at once.
    let concurrency: Int

    /// `clock`: the escrow's, on which the run loop's waits are counted.
    init(clock: any WallClock, concurrency: Int) {
        wakeup = Wakeup(clock: clock)
        self.concurrency = concurrency
    }

    var isShuttingDown: Bool { state.withLockedValue { $0.shuttingDown } }
    /// Deliveries started and not finished: requests out, and answered outcomes not yet committed.
    var unfinished: Int { state.withLockedValue { $0.inFlight + $0.committing } }
    var summary: ReplaySummary { state.withLockedValue { $0.summary } }

    /// Whether another delivery may start: fewer than `concurrency` requests out, and fewer than four times
    /// `concurrency` deliveries unfinished (requests out and answered outcomes waiting for their commit), so that a slow
    /// store holds back delivery instead of piling up answers.
    var hasFreeSlot: Bool { state.withLockedValue { Self.hasFreeSlot($0, concurrency: concurrency) } }

    /// Deliveries unfinished at most, per slot. A group commit of outcomes holds about 50 under load, with as many
    /// queued behind it by the time it ends: with twice the concurrency (64 slots) allowed, answered outcomes held the
    /// next requests back at moments and left the cores idle; four times gave 3–5% more purges a second, alternated
    /// (`docs/performance.md`), eight times no more than four.
    static let unfinishedPerSlot = 4

    private static func hasFreeSlot(_ state: State, concurrency: Int) -> Bool {
        state.inFlight < concurrency && state.inFlight + state.committing < unfinishedPerSlot * concurrency
    }

    /// Graceful shutdown: claim nothing more, let what is in flight finish.
    func shutDown() {
        state.withLockedValue { $0.shuttingDown = true }
        wakeup.signal()
    }

    func started() {
        state.withLockedValue { $0.inFlight += 1 }
    }

    /// The backend answered (or the request failed): the slot is free; the outcome is being committed.
    func answered() {
        state.withLockedValue {
            $0.inFlight -= 1
            $0.committing += 1
        }
        wakeup.signal()
    }

    /// The delivery is over; `answered` says whether ``answered()`` was called for it.
    /// Returns whether it woke the run loop.
    @discardableResult
    func finished(answered: Bool) -> Bool {
        // A request that ended unanswered frees a slot. A commit that ends matters to the run loop only when
        // answered outcomes were what held the next delivery back, or when it was the last thing unfinished: the
        // loop is woken for those, not for every commit (half its wake-ups).
        let ring = state.withLockedValue { state -> Bool in
            guard answered else {
                state.inFlight -= 1
                return true
            }
            let heldBack = !Self.hasFreeSlot(state, concurrency: concurrency)
            state.committing -= 1
            return heldBack || state.inFlight + state.committing == 0 || state.shuttingDown
        }
        if ring { wakeup.signal() }
        return ring
    }

    /// Notes claimed escrows that have no Apple token exchange (found with one read for the claim's batch).
    func noteWithoutAppleExchanges(_ ids: some Sequence<EscrowID>) {
        state.withLockedValue { $0.withoutAppleExchanges.formUnion(ids) }
    }

    /// Whether escrow `id` was noted as having no Apple token exchange, forgetting it: asked once per claim of it,
    /// by its delivery or when its lease is given back unstarted.
    func takeWithoutAppleExchange(_ id: EscrowID) -> Bool {
        state.withLockedValue { $0.withoutAppleExchanges.remove(id) != nil }
    }

    func update(_ change: (inout ReplaySummary) -> Void) {
        state.withLockedValue { change(&$0.summary) }
    }
}
