import EscrowCore
import EscrowCrypto

#if canImport(Glibc)
import Glibc
#endif

/// File-system steps shared by the stores.
enum StoreFiles {
    /// Creates the directory that will hold `path`, owner-only (0700), when it is missing.
    static func createParentDirectory(of path: String) throws(EscrowStoreError) {
        do {
            try OwnerOnlyDirectory.createParent(of: path)
        } catch {
            throw EscrowStoreError(.unavailable, error.description)
        }
    }

    /// Creates the database file empty and owner-only (0600) when it is missing, whatever the process's
    /// umask (an embedding process may not restrict it as the CLI does). SQLite gives the `-wal` and
    /// `-shm` files it creates later the database file's mode, so they are owner-only too. An existing
    /// file is left as it is.
    static func createOwnerOnlyFile(_ path: String) throws(EscrowStoreError) {
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            if errno == EEXIST { return }
            throw EscrowStoreError(.unavailable, "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        // The mode given to open is only ever narrowed by the umask; set it exactly.
        guard fchmod(fd, 0o600) == 0 else {
            throw EscrowStoreError(.unavailable, "cannot restrict \(path): \(String(cString: strerror(errno)))")
        }
    }
}
