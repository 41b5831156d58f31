import Foundation

/// Runs async code to completion on the calling thread.
///
/// The store engine (`StoreEngine` in EscrowCore) is written once, in async Swift, for every store: PostgreSQL's
/// statements really suspend. SQLite's are synchronous calls on GRDB's writer connection, which may only be used on
/// the writer's own thread, inside the closure GRDB runs there. So the engine runs there: as a task whose preferred
/// executor is this thread (SE-0417), drained here until the task ends. The task's nonisolated async functions run
/// on it without a hop; a statement of the SQLite driver never suspends, so the whole transaction runs as if it were
/// synchronous code, and the GRDB `Database` never leaves its thread. (Neither GRDB nor the standard library offer
/// this: GRDB's transactions take synchronous closures.)
enum InlineTask {
    /// Runs `body` on this thread and returns what it returns. Blocks the thread until then: call it only where
    /// blocking is allowed (GRDB's writer queue, the group commit's queue), never on a Swift concurrency thread.
    static func run<T>(_ body: @escaping () async throws -> T) throws -> T {
        let executor = ThreadExecutor()
        let outcome = Transfer<Result<T, any Error>?>(nil)
        let work = Transfer(body)
        Task(executorPreference: executor) {
            let result: Result<T, any Error>
            do { result = .success(try await work.value()) } catch { result = .failure(error) }
            outcome.value = result
            executor.finish()
        }
        executor.drain()
        guard let result = outcome.value else { preconditionFailure("an inline task ended without a result") }
        return try result.get()
    }

    /// A value handed to the inline task. It never crosses threads: the task runs only on the thread that made it
    /// and waits for it.
    private final class Transfer<Value>: @unchecked Sendable {
        var value: Value
        init(_ value: Value) { self.value = value }
    }

    /// A task executor that runs its jobs on the thread that drains it.
    private final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
        private let condition = NSCondition()
        private var jobs: [UnownedJob] = []
        private var finished = false

        func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            condition.lock()
            jobs.append(job)
            condition.signal()
            condition.unlock()
        }

        func finish() {
            condition.lock()
            finished = true
            condition.signal()
            condition.unlock()
        }

        /// Runs jobs until the task finished. A job enqueued from another thread (a task that truly suspended and was
        /// resumed there) is waited for.
        func drain() {
            while true {
                condition.lock()
                while jobs.isEmpty, !finished { condition.wait() }
                if jobs.isEmpty {
                    condition.unlock()
                    return
                }
                let job = jobs.removeFirst()
                condition.unlock()
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
        }
    }
}
