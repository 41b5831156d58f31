import EscrowTestSupport
import Testing

@testable import ProfileEscrow

/// The replay run's slots and when a finished delivery wakes the run loop: always for a slot freed without an answer,
/// for a commit only when answered outcomes held the next delivery back or nothing is left unfinished.
@Suite("Replay run slots")
struct ReplayRunTests {
    @Test func aCommitWakesTheLoopOnlyWhenItHeldADeliveryBackOrWasTheLast() {
        let run = ReplayRun(clock: TestClock(), concurrency: 2)
        run.started()
        run.started()
        #expect(!run.hasFreeSlot, "two requests out of two")
        run.answered()
        run.answered()
        #expect(run.hasFreeSlot, "answered: the slots are free while the outcomes commit")
        #expect(!run.finished(answered: true), "one commit of two, nothing held back: no wake-up")
        #expect(run.finished(answered: true), "the last thing unfinished: the loop must see the run end")
        #expect(run.unfinished == 0)
    }

    @Test func aCommitThatHeldTheNextDeliveryBackWakesTheLoop() {
        let run = ReplayRun(clock: TestClock(), concurrency: 1)
        for _ in 0..<ReplayRun.unfinishedPerSlot - 1 {
            run.started()
            run.answered()
        }
        #expect(run.hasFreeSlot, "three answered outcomes waiting for their commit, no request out")
        run.started()
        #expect(!run.hasFreeSlot, "one out, and three answered outcomes waiting: four per slot")
        #expect(run.finished(answered: true), "the commit frees the share the next delivery waited for")
        #expect(!run.hasFreeSlot, "one request still out")
        #expect(run.finished(answered: false), "a request that ended unanswered frees its slot")
        #expect(run.hasFreeSlot)
        for _ in 0..<2 {
            run.started()
            run.answered()
        }
        #expect(!run.hasFreeSlot, "four answered outcomes waiting for their commit, none out: held back")
        #expect(run.finished(answered: true))
        #expect(run.hasFreeSlot)
    }

    @Test func duringShutdownEveryCommitWakesTheLoop() {
        let run = ReplayRun(clock: TestClock(), concurrency: 4)
        for _ in 0..<3 {
            run.started()
            run.answered()
        }
        run.shutDown()
        #expect(run.finished(answered: true))
        #expect(run.finished(answered: true))
    }
}
