import EscrowCore
import EscrowCrypto

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
}
