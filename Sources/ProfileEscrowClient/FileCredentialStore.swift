public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A ``CredentialStore`` in a directory of its own: one file per item, mode 0600, in a directory kept at 0700.
///
/// For Linux, for tests, and for an app with no Keychain. Each save writes a temporary file beside the item
/// (`O_CREAT | O_EXCL`, 0600), `fsync`s it, renames it over the item and `fsync`s the directory: a crash leaves the
/// old item or the new one, never a torn one. Names are `[A-Za-z0-9_-]`, at most 64 characters (no path can be
/// made of one).
public struct FileCredentialStore: CredentialStore {
    public let directory: String

    private static let suffix = ".item"
    private static let temporarySuffix = ".tmp"

    /// Creates `directory` (and its missing ancestors) with mode 0700, or narrows an existing one to 0700; removes
    /// the temporary files a crash may have left.
    public init(directory: String) throws {
        self.directory = directory
        try FileManager.default.createDirectory(
            atPath: directory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        guard chmod(directory, 0o700) == 0 else { throw CredentialStoreError("secure its directory", status: errno) }
        for name in try FileManager.default.contentsOfDirectory(atPath: directory)
        where name.hasPrefix(".") && name.hasSuffix(Self.temporarySuffix) {
            unlink(directory + "/" + name)
        }
    }

    public func save(_ item: Data, as name: String) throws {
        let path = try path(of: name)
        let temporary = directory + "/." + name + "-" + UUID().uuidString + Self.temporarySuffix
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw CredentialStoreError("create an item", status: errno) }
        do {
            defer { close(descriptor) }
            try item.withUnsafeBytes { bytes in
                var written = 0
                while written < bytes.count {
                    let count = write(descriptor, bytes.baseAddress! + written, bytes.count - written)
                    guard count > 0 else { throw CredentialStoreError("write an item", status: errno) }
                    written += count
                }
            }
            guard fsync(descriptor) == 0 else { throw CredentialStoreError("sync an item", status: errno) }
            guard rename(temporary, path) == 0 else { throw CredentialStoreError("replace an item", status: errno) }
        } catch {
            unlink(temporary)
            throw error
        }
        try syncDirectory()
    }

    public func load(_ name: String) throws -> Data? {
        let path = try path(of: name)
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let item = FileManager.default.contents(atPath: path) else {
            throw CredentialStoreError("read an item", status: errno)
        }
        return item
    }

    public func remove(_ name: String) throws {
        guard unlink(try path(of: name)) == 0 || errno == ENOENT else {
            throw CredentialStoreError("remove an item", status: errno)
        }
        try syncDirectory()
    }

    public func names() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory)
            .filter { !$0.hasPrefix(".") && $0.hasSuffix(Self.suffix) }
            .map { String($0.dropLast(Self.suffix.count)) }
            .sorted()
    }

    private func path(of name: String) throws -> String {
        guard !name.isEmpty, name.count <= 64,
            name.unicodeScalars.allSatisfy(Self.nameCharacters.contains)
        else { throw CredentialStoreError("use a malformed name", status: EINVAL) }
        return directory + "/" + name + Self.suffix
    }

    private static let nameCharacters = CharacterSet(
        charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
    )

    /// Makes a rename or an unlink durable.
    private func syncDirectory() throws {
        let descriptor = open(directory, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw CredentialStoreError("open its directory", status: errno) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw CredentialStoreError("sync its directory", status: errno) }
    }
}
