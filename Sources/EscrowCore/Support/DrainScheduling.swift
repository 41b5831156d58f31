import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// How a blocking group commit's drain (SQLite's writer) is scheduled, in a process whose threads run under Linux's
/// `SCHED_BATCH`.
///
/// Under `SCHED_BATCH` a thread that wakes up does not preempt the running one. That is what sealing wants, but not the
/// writer: a commit is on the path of every capture in its batch (about 25 under load), and a writer that waits for
/// the sealing threads' slices to end leaves the cores idle later, when every capture in flight waits for it. So a
/// process that moved its threads to batch itself (`serve` and `replay`, `--scheduling batch`) turns this on, and a
/// drain then runs under the normal policy and returns its thread to batch when it ends (Dispatch's threads run other
/// work too). Measured under 64 connections of captures: 1–5% more captures a second, with less idle CPU
/// (`docs/performance.md`).
///
/// Off by default: a library leaves its host's scheduling alone, and a process started under batch by its operator
/// (systemd's `CPUSchedulingPolicy=`, whose unit may deny `sched_setscheduler` to the process) makes no such call.
package enum DrainScheduling {
    private static let normalWhileDraining = Atomic<Bool>(false)

    /// Drains from now on run under the normal policy when their thread is batch.
    package static func runDrainsUnderNormalPolicy() {
        normalWhileDraining.store(true, ordering: .releasing)
    }

    /// Runs `body` (a drain) under the normal policy if this is turned on and the calling thread is batch, and returns
    /// the thread to batch after. A refused call changes nothing: the drain runs as batch.
    @inlinable
    package static func draining<T>(_ body: () -> T) -> T {
        draining(underNormalPolicy: isOn, body)
    }

    /// Whether ``runDrainsUnderNormalPolicy()`` was called: this process moves its own threads between policies.
    @usableFromInline
    package static var isOn: Bool { normalWhileDraining.load(ordering: .acquiring) }

    /// ``draining(_:)`` with the switch given (tests).
    @inlinable
    static func draining<T>(underNormalPolicy: Bool, _ body: () -> T) -> T {
        let raised = underNormalPolicy && enterDrain()
        defer { if raised { leaveDrain() } }
        return body()
    }

    @usableFromInline
    static func enterDrain() -> Bool {
        #if os(Linux)
        guard sched_getscheduler(0) == SchedulingPolicy.batch else { return false }
        var parameters = sched_param(sched_priority: 0)
        return sched_setscheduler(0, SchedulingPolicy.other, &parameters) == 0
        #else
        return false
        #endif
    }

    @usableFromInline
    static func leaveDrain() {
        #if os(Linux)
        var parameters = sched_param(sched_priority: 0)
        _ = sched_setscheduler(0, SchedulingPolicy.batch, &parameters)
        #endif
    }
}
