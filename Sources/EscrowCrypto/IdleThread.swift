internal import CSodium
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A thread of its own for work done ahead of need (``SealingKeyReserve``), which should take a core only when nothing
/// else wants it.
enum IdleThread {
    /// Runs `body` on a new thread named `name` (at most 15 bytes show, in `top -H` and /proc/<pid>/task). With
    /// `idlePriority`, the thread first moves itself to Linux's `SCHED_IDLE`: it then runs only on a core that has
    /// nothing else to run. Only for a process that may change its threads' policy (a seccomp filter such as systemd's
    /// `SystemCallFilter=~@resources` kills a process for the call); refused, it keeps the process's policy.
    static func start(name: String, idlePriority: Bool, _ body: @escaping @Sendable () -> Void) {
        Thread {
            #if os(Linux)
            // A new thread inherits its creator's name; this one gets its own.
            _ = profile_escrow_set_thread_name(name)
            if idlePriority {
                // SCHED_IDLE is 5 in <linux/sched.h>; Glibc declares it only under _GNU_SOURCE, which Swift does not
                // import.
                var parameters = sched_param(sched_priority: 0)
                _ = sched_setscheduler(0, 5, &parameters)
            }
            #endif
            body()
        }.start()
    }
}
