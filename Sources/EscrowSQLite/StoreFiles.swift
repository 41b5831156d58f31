import EscrowCore
import EscrowCrypto

#if canImport(Glibc)
import Glibc
#endif

/// File-system steps shared by the stores.
enum StoreFiles {
    /// Creates the database file owner-only (0600) when it is missing, whatever the process's umask: SQLite
    /// gives the `-wal`, `-shm` and `-journal` files it creates the database file's mode, so they are
    /// owner-only too. A library user who embeds the store without the CLI's `umask 077` gets the same modes.
    static func createOwnerOnlyFile(_ path: String) throws(EscrowStoreError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor < 0 {
            guard errno == EEXIST else {
                throw EscrowStoreError(.unavailable, "cannot create \(path): \(String(cString: strerror(errno)))")
            }
            return
        }
        _ = fchmod(descriptor, 0o600)  // the umask may have taken bits away, never added: make it exact
        close(descriptor)
    }

    /// Creates the directory that will hold `path`, owner-only (0700), when it is missing.
    static func createParentDirectory(of path: String) throws(EscrowStoreError) {
        do {
            try OwnerOnlyDirectory.createParent(of: path)
        } catch {
            throw EscrowStoreError(.unavailable, error.description)
        }
    }
}
