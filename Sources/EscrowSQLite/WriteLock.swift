import EscrowCore
import Foundation
import Logging
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// Serialises every write transaction and every checkpoint on one SQLite file across all the processes
/// that open it: an exclusive `flock` on `<database>.write-lock`, held for one transaction at a time.
///
/// SQLite before 3.51.3 can corrupt a WAL database when two connections write or checkpoint at once (the
/// WAL-reset bug). SQLite's own locks do not prevent it, so every writer of this store takes this lock
/// around each `BEGIN IMMEDIATE … COMMIT` (the automatic checkpoint at commit runs inside it) and around
/// each explicit checkpoint; readers never checkpoint (their connections are opened with "no checkpoint
/// on close"). The kernel releases the lock however a process ends, SIGKILL included.
///
/// Waiting is bounded: a writer polls for the lock for at most ``timeout`` seconds, then fails with
/// ``EscrowStoreError/Code/busy`` naming the wait, never with `SQLITE_BUSY`.
///
/// Every write passes here, so here a disk error stops the store: see ``DiskFailure``.
final class WriteLock: Sendable {
    let path: String
    let timeout: Double
    /// The database file's ``DiskFailure`` key.
    let databaseKey: String
    /// Where a disk error is reported (critical).
    let logger: Logger?
    private let descriptor: Int32
    /// One holder per process at a time: `flock` locks belong to the open file, not to a thread.
    private let inProcess = NIOLock()
    /// Whether this process holds the `flock` now (for ``waitUntilFree(before:)``).
    private let holding = NIOLockedValueBox(false)

    init(databasePath: String, timeout: Double, logger: Logger? = nil) throws(EscrowStoreError) {
        let path = databasePath + ".write-lock"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw EscrowStoreError(
                .unavailable,
                "cannot open the write lock \(path): \(String(cString: strerror(errno)))"
            )
        }
        // Owner-only whatever the umask (open's mode is only ever narrowed by it).
        _ = fchmod(fd, 0o600)
        self.path = path
        self.timeout = timeout
        self.databaseKey = DiskFailure.key(databasePath)
        self.logger = logger
        self.descriptor = fd
    }

    deinit {
        close(descriptor)
    }

    /// Runs `body` holding the lock. Blocks the calling thread: call it on a database queue, never on a
    /// Swift concurrency thread. Refused once the file met a disk error; a disk error from `body` marks it
    /// (``DiskFailure``).
    func withLock<T>(_ body: () throws -> T) throws -> T {
        try inProcess.withLock {
            try DiskFailure.guarding(databaseKey, logger: logger, recovery: { self.startRecovery() }) {
                try acquire(timeout: timeout)
                holding.withLockedValue { $0 = true }
                defer {
                    holding.withLockedValue { $0 = false }
                    _ = flock(descriptor, LOCK_UN)
                }
                return try body()
            }
        }
    }

    /// Takes the lock; ``unlock()`` gives it back. For a transaction whose body is the store engine's (async code
    /// run on the writer's own thread, see ``InlineTask``): the thread holds the lock until `unlock`. Refused once
    /// the file met a disk error; the transaction reports its own errors with ``noteFailure(_:)``. `timeout`, when
    /// given, bounds this wait instead of ``timeout`` (a web sign-in's callback waits a few seconds, not thirty).
    func lock(timeout: Double? = nil) throws(EscrowStoreError) {
        try DiskFailure.check(databaseKey)
        inProcess.lock()
        do {
            try acquire(timeout: timeout ?? self.timeout)
            holding.withLockedValue { $0 = true }
        } catch {
            inProcess.unlock()
            throw error
        }
    }

    func unlock() {
        holding.withLockedValue { $0 = false }
        _ = flock(descriptor, LOCK_UN)
        inProcess.unlock()
    }

    /// Waits until no other process holds the lock, at most until `deadline`; whether none did. Takes nothing: it
    /// tries a descriptor of its own and lets go at once, so a write that must not queue behind one of this process
    /// already waiting for another process (a web sign-in's callback) can give up first. The lock held by this
    /// process counts as free (its transactions are short and the write queues behind them). Blocks the thread.
    func waitUntilFree(before deadline: ContinuousClock.Instant) -> Bool {
        let probe = open(path, O_RDWR | O_CLOEXEC)
        guard probe >= 0 else { return true }  // the write itself will say what is wrong
        defer { close(probe) }
        var pause: UInt32 = 100  // microseconds, doubling to 5 ms
        while true {
            if flock(probe, LOCK_EX | LOCK_NB) == 0 {
                _ = flock(probe, LOCK_UN)
                return true
            }
            guard errno == EWOULDBLOCK || errno == EINTR else { return true }
            if holding.withLockedValue({ $0 }) { return true }
            guard ContinuousClock.now < deadline else { return false }
            usleep(pause)
            pause = min(pause * 2, 5_000)
        }
    }

    /// A write under the lock failed with `error`: a disk error marks the file failed (``DiskFailure``).
    func noteFailure(_ error: any Error) {
        if DiskFailure.isDiskError(error), DiskFailure.mark(databaseKey, error, logger: logger) { startRecovery() }
    }

    /// The waits before each recovery attempt (seconds): then the store stays refused.
    static let recoveryDelays: [Double] = [1, 2, 4, 8, 16, 30, 30]

    /// After the first disk error: on a thread of its own (it blocks on the lock and the disk), attempts to write the
    /// database and its WAL back from the page cache and sync them (``DiskRecovery``), under this lock so that no
    /// process writes meanwhile; the first that succeeds lets writes go on (``DiskFailure/clear(_:)``). Bounded:
    /// ``recoveryDelays``, then the store stays refused and says so.
    func startRecovery() {
        let thread = Thread { [self] in
            for (attempt, delay) in Self.recoveryDelays.enumerated() {
                usleep(UInt32(delay * 1_000_000))
                do {
                    try recoverOnce()
                    DiskFailure.clear(databaseKey)
                    logger?.notice(
                        "the store's files were written again from the page cache and synced: writes go on",
                        metadata: ["path": "\(databaseKey)", "attempt": "\(attempt + 1)"]
                    )
                    return
                } catch {
                    logger?.error(
                        "the store's files could not be written again and synced yet",
                        metadata: ["path": "\(databaseKey)", "attempt": "\(attempt + 1)", "error": "\(error)"]
                    )
                }
            }
            logger?.critical(
                "the store's disk keeps failing: it takes no writes. Check the disk, then restart",
                metadata: ["path": "\(databaseKey)"]
            )
        }
        thread.name = "store-recovery"
        thread.start()
    }

    /// One attempt, holding the lock (no process writes the files meanwhile).
    private func recoverOnce() throws {
        inProcess.lock()
        defer { inProcess.unlock() }
        try acquire(timeout: timeout)
        holding.withLockedValue { $0 = true }
        defer {
            holding.withLockedValue { $0 = false }
            _ = flock(descriptor, LOCK_UN)
        }
        for suffix in ["-wal", ""] { try DiskRecovery.rewrite(databaseKey + suffix) }
        try DiskRecovery.syncFolder(of: databaseKey)
    }

    private func acquire(timeout: Double) throws(EscrowStoreError) {
        if flock(descriptor, LOCK_EX | LOCK_NB) == 0 { return }
        let start = DispatchTime.now().uptimeNanoseconds
        let bound = UInt64(max(0, timeout) * 1e9)
        var pause: UInt32 = 100  // microseconds, doubling to 5 ms
        while DispatchTime.now().uptimeNanoseconds - start < bound {
            usleep(pause)
            pause = min(pause * 2, 5_000)
            if flock(descriptor, LOCK_EX | LOCK_NB) == 0 { return }
            guard errno == EWOULDBLOCK || errno == EINTR else {
                throw EscrowStoreError(.unavailable, "cannot lock \(path): \(String(cString: strerror(errno)))")
            }
        }
        throw EscrowStoreError(
            .busy,
            "another process held the store's write lock for more than \(Int(timeout.rounded(.up))) s; try again"
        )
    }
}
