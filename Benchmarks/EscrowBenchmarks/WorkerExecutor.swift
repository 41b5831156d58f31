import Foundation

/// The threads concurrent benchmarks run their tasks on: one per core, as a service's own would be.
///
/// The benchmark harness (ordo-one's `benchmark` 1.x) runs an async benchmark by waiting on a semaphore from
/// its own async `run()`, which blocks one thread of Swift's cooperative pool for the whole run. On a 2-core
/// machine that leaves the captures one thread, half the machine (measured: 1.2 of 2 cores busy, 158 µs per
/// capture). Tasks that prefer this executor run on dedicated threads that the harness does not block.
final class WorkerExecutor: TaskExecutor, @unchecked Sendable {
    static let shared = WorkerExecutor(threads: ProcessInfo.processInfo.activeProcessorCount)

    private let condition = NSCondition()
    /// Guarded by `condition`: jobs waiting to run, first at `head`.
    private var jobs: [UnownedJob] = []
    private var head = 0

    init(threads: Int) {
        for number in 0..<threads {
            let thread = Thread { [unowned self] in self.work() }
            thread.name = "benchmark-worker-\(number)"
            thread.start()
        }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func work() {
        let executor = asUnownedTaskExecutor()
        while true {
            condition.lock()
            while head == jobs.count { condition.wait() }
            let job = jobs[head]
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            }
            condition.unlock()
            job.runSynchronously(on: executor)
        }
    }
}
