/// Linux's scheduling policies by number, from `<linux/sched.h>`: Glibc declares `SCHED_BATCH` only under
/// `_GNU_SOURCE`, which Swift does not import. Used by `serve` and `replay`'s `--scheduling` and by
/// ``DrainScheduling``.
package enum SchedulingPolicy {
    /// `SCHED_OTHER`, Linux's default.
    package static let other: Int32 = 0
    /// `SCHED_BATCH`: a thread that wakes up does not preempt the running one.
    package static let batch: Int32 = 3
}
