import EscrowCore
import Foundation

/// File-system steps shared by the stores.
enum StoreFiles {
    /// Creates the directory that will hold `path`, owner-only (0700), when it is missing.
    static func createParentDirectory(of path: String) throws(EscrowStoreError) {
        let directory = (path as NSString).deletingLastPathComponent
        guard !directory.isEmpty, !FileManager.default.fileExists(atPath: directory) else { return }
        do {
            try FileManager.default.createDirectory(
                atPath: directory,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
        } catch {
            throw EscrowStoreError(.unavailable, "cannot create the directory \(directory)")
        }
    }
}
