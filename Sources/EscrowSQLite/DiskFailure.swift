import EscrowCore
import Foundation
import GRDB
import Logging
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// The SQLite files of this process that met a failed write or fsync, and what failed: once one has, nothing is
/// written to it again until the process restarts.
///
/// After a failed `fsync` (`EIO`) Linux marks the pages it could not write clean: the page cache still shows the
/// new bytes, the disk does not hold them, and the next `fsync` succeeds without writing them (PostgreSQL's
/// "fsyncgate"). A failed `write` (`EIO`, `ENOSPC`) leaves a WAL frame half there. SQLite answers the commit with
/// an I/O error, but its next commits append after those frames, and a commit made without waiting for the disk
/// (a claim's leases, `synchronous=NORMAL`) may be among them: after a power cut WAL recovery stops at the first
/// frame that is not on disk, and every later commit, acknowledged or not, is gone with it. So the first write
/// transaction or checkpoint that fails with `SQLITE_IOERR` or `SQLITE_FULL` marks the file failed, logs it as
/// critical, and every later write is refused as ``EscrowStoreError/Code/unavailable`` (and `/readyz` answers
/// `503`): what was acknowledged before stays durable, nothing is acknowledged on top of what may be lost. The
/// mark is per file and per process, so a store opened again in the same process is refused too.
///
/// The store then recovers by itself when the disk works again (``WriteLock/startRecovery()``): under the write lock,
/// so that no process writes meanwhile, every byte of the database and its WAL is written back in place from the page
/// cache (what SQLite and every client saw) and synced, with the folder. Once that succeeds the disk holds what the
/// cache holds, the pages a failed fsync left behind included, and writes go on; until then `/readyz` answers `503`.
/// The attempts back off (1 s, doubling, to 30 s); a disk that fails all of them stays refused until a person
/// checks it and restarts the process.
///
/// A full disk (`SQLITE_FULL`: a `write` refused with `ENOSPC`) is not such a failure: the refused write put nothing
/// in the page cache that the disk lacks, SQLite rolled the transaction back (its frames past the last commit are
/// never read, and the next transaction writes over them), so nothing was stored and every later commit still chains
/// after what the disk holds. The write is refused as `unavailable` ("not stored"), logged, and `/readyz` answers
/// `503` for ``fullWindow`` after it; the next write tries again, and succeeds once there is space: no restart.
/// (`ENOSPC` from an `fsync`, as some file systems report it, is an I/O error to SQLite and stops the store.)
enum DiskFailure {
    private static let failed = NIOLockedValueBox<[String: String]>([:])
    /// The files whose last write found the disk full, and when.
    private static let full = NIOLockedValueBox<[String: ContinuousClock.Instant]>([:])

    /// How long after a write found the disk full `/readyz` still says so.
    static let fullWindow: Duration = .seconds(5)

    /// The reason the file at `key` stopped taking writes, or nil.
    static func reason(_ key: String) -> String? {
        failed.withLockedValue { $0[key] }
    }

    /// Throws when the file at `key` stopped taking writes.
    static func check(_ key: String) throws(EscrowStoreError) {
        guard let reason = reason(key) else { return }
        throw EscrowStoreError(
            .unavailable,
            "the store at \(key) takes no writes since a disk error (\(reason)) until its files are written again and "
                + "synced (tried in the background; if the disk keeps failing, check it, then restart)"
        )
    }

    /// Whether `error` is a disk's failure: an I/O error (a failed `write`, `fsync`, `ftruncate`…) or a full disk.
    static func isDiskError(_ error: any Error) -> Bool {
        guard let error = error as? DatabaseError else { return false }
        return error.resultCode == .SQLITE_IOERR || error.resultCode == .SQLITE_FULL
    }

    /// Whether `error` is a full disk: the transaction was rolled back, nothing of it stored.
    static func isFullDisk(_ error: any Error) -> Bool {
        (error as? DatabaseError)?.resultCode == .SQLITE_FULL
    }

    /// Throws while a write to the file at `key` found the disk full within ``fullWindow`` (for `/readyz`).
    static func checkSpace(_ key: String, now: ContinuousClock.Instant = .now) throws(EscrowStoreError) {
        guard let since = full.withLockedValue({ $0[key] }), now - since < fullWindow else { return }
        throw EscrowStoreError(.unavailable, "the disk of the store at \(key) was full a moment ago")
    }

    /// Runs `body`, a write to the file at `key`: refused once the file failed; a disk error from it marks the file
    /// failed (logged once, as critical) before it is rethrown, and starts `recovery` when it is the first.
    static func guarding<T>(
        _ key: String,
        logger: Logger?,
        recovery: (() -> Void)? = nil,
        _ body: () throws -> T
    ) throws -> T {
        try check(key)
        do {
            return try body()
        } catch {
            if isDiskError(error), mark(key, error, logger: logger) { recovery?() }
            throw error
        }
    }

    /// Marks the file at `key` failed; whether this was the first mark (a full disk marks nothing: false).
    @discardableResult
    static func mark(_ key: String, _ error: any Error, logger: Logger?) -> Bool {
        let reason = SQLiteEscrowStore.describe(error)
        if isFullDisk(error) {
            // Rolled back, nothing stored: the store goes on, and the next write tries again. Logged once a window.
            let now = ContinuousClock.now
            let first = full.withLockedValue { full in
                defer { full[key] = now }
                return full[key].map { now - $0 >= fullWindow } ?? true
            }
            if first {
                let message =
                    "the disk is full: a write to the store was refused and rolled back, nothing of it stored; writes "
                    + "go on once there is space"
                logger?.error("\(message)", metadata: ["path": "\(key)", "error": "\(reason)"])
            }
            return false
        }
        let first = failed.withLockedValue { failed in
            guard failed[key] == nil else { return false }
            failed[key] = reason
            return true
        }
        guard first else { return false }
        let message =
            "a write to the store failed with a disk error: its outcome is unknown, and the store takes no writes "
            + "until its files are written again from the page cache and synced (tried in the background; what was "
            + "acknowledged before is durable)"
        let metadata: Logger.Metadata = ["path": "\(key)", "error": "\(reason)"]
        if let logger {
            logger.critical("\(message)", metadata: metadata)
        } else {
            // No logger at hand: standard error, so it is never silent.
            FileHandle.standardError.write(Data("critical: \(message) [path \(key): \(reason)]\n".utf8))
        }
        return true
    }

    /// The file at `key` takes writes again: its files were written back and synced (``WriteLock/startRecovery()``).
    static func clear(_ key: String) {
        _ = failed.withLockedValue { $0.removeValue(forKey: key) }
    }

    /// The key of the file at `path`: its absolute, resolved path, the same for every store opened on it.
    static func key(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
