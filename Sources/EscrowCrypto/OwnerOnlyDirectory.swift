#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// Creates directories owner-only (mode 0700) with every missing ancestor: the keyring's directory and the
/// stores' (`EscrowSQLite`). The package's one helper for it.
public enum OwnerOnlyDirectory {
    /// Names the directory and the system's reason (`strerror`); never a file's contents.
    public struct CreationError: Error, Sendable, CustomStringConvertible {
        public let directory: String
        public let reason: String

        public var description: String { "cannot create the directory \(directory): \(reason)" }
    }

    /// Creates the directory that will hold the file `path`, when it is missing (nothing for a bare file name).
    public static func createParent(of path: String) throws(CreationError) {
        guard let slash = path.lastIndex(of: "/") else { return }
        let directory = String(path[..<slash])
        try create(directory.isEmpty ? "/" : directory)
    }

    /// Creates `directory` and any missing ancestor, each with mode 0700; an existing one is left as it is.
    public static func create(_ directory: String) throws(CreationError) {
        var info = stat()
        if stat(directory, &info) == 0 { return }
        if let slash = directory.lastIndex(of: "/"), slash != directory.startIndex {
            try create(String(directory[..<slash]))
        }
        guard mkdir(directory, 0o700) == 0 || errno == EEXIST else {
            throw CreationError(directory: directory, reason: String(cString: strerror(errno)))
        }
    }
}
