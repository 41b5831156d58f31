import EscrowCore
import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// The single-writer slot of one SQLite file: an exclusive `flock` on `<database>.writer-lock`,
/// released by the kernel when the process ends, however it ends (SIGKILL included).
///
/// The lock file names its holder (pid, command, since) so a refused process can say who owns it.
final class WriterLock: Sendable {
    /// The lock file's descriptor while the slot is held; `nil` once released.
    private let descriptor: NIOLockedValueBox<Int32?>

    init(databasePath: String, owner: String) throws(EscrowStoreError) {
        let path = databasePath + ".writer-lock"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw EscrowStoreError(
                .unavailable,
                "cannot open the writer lock \(path): \(String(cString: strerror(errno)))"
            )
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let holder = Self.readHolder(fd)
            close(fd)
            throw EscrowStoreError(
                .writerLocked,
                "the store \(databasePath) is open for writing by another process (\(holder)). This SQLite "
                    + "allows one writing process per database file: stop that process, or use its HTTP API, "
                    + "or move to PostgreSQL to run several writers. Read-only commands (status, purge-report) "
                    + "and token management (tokens add|list|revoke) keep working."
            )
        }
        let text = "pid \(getpid()), \(owner), since \(Timestamp.seconds(Date()))"
        _ = ftruncate(fd, 0)
        _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
        self.descriptor = NIOLockedValueBox(fd)
    }

    /// Gives the slot back: another writer may open the store at once. Idempotent.
    func release() {
        descriptor.withLockedValue { descriptor in
            guard let fd = descriptor else { return }
            _ = ftruncate(fd, 0)
            _ = flock(fd, LOCK_UN)
            close(fd)
            descriptor = nil
        }
    }

    deinit {
        release()
    }

    private static func readHolder(_ fd: Int32) -> String {
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 511, 0) }
        guard count > 0 else { return "holder unknown" }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }
}
