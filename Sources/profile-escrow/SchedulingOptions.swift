import ArgumentParser
import EscrowCore
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// `--scheduling`: how Linux schedules the threads of a long-running command (`serve`, `replay`).
///
/// Under Linux's normal policy a thread that wakes up preempts the one running on its core when it has had less CPU:
/// an event loop woken by the network stops a thread in the middle of sealing, the thread woken by a commit stops the
/// event loop, and so on. `SCHED_BATCH` keeps the same fair share but does not preempt on wake-up: the woken thread
/// runs when the running one blocks or its slice ends. Under 64 connections of captures that cut involuntary context
/// switches from 1.0 to 0.15 per capture, the CPU of a capture by 7%, and p50 and p90 latency by a few per cent (p99
/// within the noise); see docs/performance.md. An unprivileged process may choose it for itself, and `normal` keeps
/// the system's default. The store's writer drains its group commits under the normal policy (`DrainScheduling`).
struct SchedulingOptions: ParsableArguments {
    enum Policy: String, ExpressibleByArgument, CaseIterable, Sendable {
        case batch
        case normal

        static let `default` = batch
    }

    @Option(
        help: """
            How Linux schedules this process's threads: batch (SCHED_BATCH: a thread that wakes up waits for the \
            running one instead of preempting it; fewer context switches) or normal (env PROFILE_ESCROW_SCHEDULING; \
            default \(Policy.default.rawValue)).
            """
    )
    var scheduling: Policy?

    func validate() throws {
        _ = try policy()
    }

    func policy() throws -> Policy {
        try OptionEnvironment.process.value(scheduling, "scheduling") ?? .default
    }

    /// Moves every thread of the process that runs under Linux's default policy to `SCHED_BATCH`. Threads started later
    /// inherit it from the thread that starts them; a second pass catches one started while the first ran.
    ///
    /// A thread under any other policy is left as it is: an operator's choice (`chrt`, systemd's
    /// `CPUSchedulingPolicy=`) wins, and a thread already batch costs no call. That matters under a seccomp filter
    /// that denies `sched_setscheduler` and kills the process that calls it, as the systemd unit in `docs/deploy/`
    /// does (it sets `CPUSchedulingPolicy=batch` instead). A thread that cannot be moved otherwise (a filter that
    /// answers `EPERM`) keeps the default: that costs speed, never correctness, so it is a warning.
    func apply(logger: Logger) throws {
        guard try policy() == .batch else { return }
        #if os(Linux)
        var moved = 0
        var failures = 0
        var lastError: Int32 = 0
        var parameters = sched_param(sched_priority: 0)
        for _ in 0..<2 {
            let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
            failures = 0
            for thread in threads.compactMap(pid_t.init) where sched_getscheduler(thread) == SchedulingPolicy.other {
                if sched_setscheduler(thread, SchedulingPolicy.batch, &parameters) == 0 {
                    moved += 1
                } else if errno != ESRCH {  // a thread that ended since the listing is not a failure
                    failures += 1
                    lastError = errno
                }
            }
        }
        logger.debug("threads moved to the batch scheduling policy", metadata: ["threads": "\(moved)"])
        // This process may change its threads' policy, and chose batch: the store's writer drains under the normal
        // policy, so that a commit that many captures wait for is not held behind sealing.
        if moved > 0 && failures == 0 { DrainScheduling.runDrainsUnderNormalPolicy() }
        if failures > 0 {
            logger.warning(
                "could not schedule every thread as batch; they keep the default policy",
                metadata: ["threads": "\(failures)", "error": "\(String(cString: strerror(lastError)))"]
            )
        }
        #endif
    }
}
