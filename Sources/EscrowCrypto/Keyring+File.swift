internal import CSodium
internal import Foundation

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

extension Keyring {
    /// The largest keyring file accepted (a keyring with thousands of versions is still far below it).
    static let maximumFileSize = 1 << 20

    /// Loads a keyring file (format: `docs/FORMAT.md`).
    ///
    /// The file is read with `read(2)` into ``SecretBytes`` and its secrets are decoded straight into
    /// ``SecretBytes``. Throws ``CryptoError/Code/keyringNotFound`` when the file is missing,
    /// ``CryptoError/Code/keyringPermissions`` when its mode grants anything to group or others (`mode & 0o077`),
    /// ``CryptoError/Code/keyringMalformed`` (naming the line number) when it is not in the format.
    public static func load(path: String) throws(CryptoError) -> Keyring {
        Sodium.ensureInitialized()
        // O_NONBLOCK: a FIFO (or another special file) at the path must not hang the open; it is refused below.
        let descriptor = systemOpen(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
            let code = errno
            switch code {
            case ENOENT, ENOTDIR:
                throw CryptoError(.keyringNotFound, "no keyring file at \(path) (create one with `keys init`)")
            case EACCES, EPERM:
                throw CryptoError(.keyringPermissions, "cannot read the keyring file \(path): permission denied")
            default:
                throw CryptoError(.keyringIO, "cannot open the keyring file \(path): \(errnoText(code))")
            }
        }
        defer { _ = systemClose(descriptor) }

        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw CryptoError(.keyringIO, "cannot stat the keyring file \(path): \(errnoText(errno))")
        }
        guard info.st_mode & 0o170000 == 0o100000 else {
            throw CryptoError(.keyringMalformed, "the keyring path \(path) is not a regular file")
        }
        let permissions = UInt32(info.st_mode) & 0o7777
        guard permissions & 0o077 == 0 else {
            throw CryptoError(
                .keyringPermissions,
                "the keyring file \(path) has mode \(octal(permissions)), readable or writable by group or others; "
                    + "restrict it with `chmod 600 \(path)`"
            )
        }
        guard Int(info.st_size) <= maximumFileSize else {
            throw CryptoError(.keyringMalformed, "the keyring file \(path) is larger than \(maximumFileSize) bytes")
        }

        // One byte more than the size fstat reported, to notice a file that grew while being read.
        let capacity = Int(info.st_size) + 1
        let contents = SecretBytes(count: capacity)
        let readCount = try contents.withUnsafeMutableBytes { buffer throws(CryptoError) -> Int in
            var total = 0
            while total < capacity {
                let result = systemRead(descriptor, buffer.baseAddress! + total, capacity - total)
                if result < 0 {
                    if errno == EINTR { continue }
                    throw CryptoError(.keyringIO, "cannot read the keyring file \(path): \(errnoText(errno))")
                }
                if result == 0 { break }
                total += result
            }
            return total
        }
        guard readCount < capacity else {
            throw CryptoError(.keyringIO, "the keyring file \(path) changed while it was read")
        }
        return try contents.withUnsafeBytes { buffer throws(CryptoError) -> Keyring in
            try KeyringFileParser(buffer: UnsafeRawBufferPointer(rebasing: buffer[0..<readCount]), path: path).parse()
        }
    }

    /// Writes the keyring file atomically with mode 0600.
    ///
    /// A `path` that is a symbolic link (a mounted secret, a file managed by configuration management) is
    /// written through: the file it points to is replaced, the link stays. Creates the directory (mode 0700)
    /// when missing, writes a temporary file beside the real file (`O_CREAT | O_EXCL`, 0600), `fsync`s it,
    /// renames it over the real file, `fsync`s the directory (the rename is then durable), and only then
    /// overwrites the old file's bytes through a descriptor kept open across the rename (the old secrets do not
    /// linger in its freed blocks). A power cut at any point leaves either the old keyring or the new one, whole.
    ///
    /// Throws ``CryptoError/Code/keyringNotDurable`` when the new file was renamed into place but the directory
    /// could not be synced (the old bytes are then kept), ``CryptoError/Code/keyringExists`` when `path` exists and `overwrite` is false, and
    /// ``CryptoError/Code/keyringRefused`` when the real file has other hard links: replacing it would leave
    /// the old secrets readable under the other names.
    public func write(path requestedPath: String, overwrite: Bool) throws(CryptoError) {
        Sodium.ensureInitialized()
        // A custody keyring's file holds wrapped secret keys only: a secret without its wrapped form is never written.
        if custody != nil, masterKeys.contains(where: { $0.secretKey != nil && $0.wrappedSecretKey == nil }) {
            throw CryptoError(.keyringRefused, "a secret key of this custody keyring is not wrapped yet: not written")
        }
        let path = try Self.resolvingSymbolicLinks(requestedPath)
        let (directory, name) = Self.split(path)
        guard !name.isEmpty, name != ".", name != ".." else {
            throw CryptoError(.keyringIO, "the keyring path \(path) does not name a file")
        }
        do {
            try OwnerOnlyDirectory.create(directory)
        } catch {
            throw CryptoError(.keyringIO, error.description)
        }
        var existing = stat()
        let exists = lstat(path, &existing) == 0
        if exists, !overwrite {
            throw CryptoError(
                .keyringExists,
                "a keyring file already exists at \(requestedPath); it was not overwritten"
            )
        }
        if exists, existing.st_nlink > 1 {
            throw CryptoError(
                .keyringRefused,
                "the keyring file \(requestedPath) has \(existing.st_nlink) hard links: replacing it would leave the old "
                    + "secrets readable under the other names; remove the other links first"
            )
        }
        // The old file, kept open across the rename so its bytes can be overwritten afterwards.
        let old = exists && existing.st_mode & 0o170000 == 0o100000 ? systemOpen(path, O_WRONLY | O_CLOEXEC) : -1
        defer { if old >= 0 { _ = systemClose(old) } }

        let contents = fileContents()
        let temporaryPath = directory + "/." + name + "." + Hex.encode(Hashing.randomBytes(count: 8)) + ".tmp"
        let descriptor = systemOpen(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw CryptoError(.keyringIO, "cannot create a file in \(directory): \(Self.errnoText(errno))")
        }
        var renamed = false
        defer {
            if !renamed { _ = unlink(temporaryPath) }
        }
        do {
            defer { _ = systemClose(descriptor) }
            guard fchmod(descriptor, 0o600) == 0 else {
                throw CryptoError(.keyringIO, "cannot set mode 0600 on the keyring file: \(Self.errnoText(errno))")
            }
            try contents.withUnsafeBytes { buffer throws(CryptoError) in
                var written = 0
                while written < buffer.count {
                    let result = systemWrite(descriptor, buffer.baseAddress! + written, buffer.count - written)
                    if result < 0 {
                        if errno == EINTR { continue }
                        throw CryptoError(.keyringIO, "cannot write the keyring file: \(Self.errnoText(errno))")
                    }
                    written += result
                }
            }
            guard fsync(descriptor) == 0 else {
                throw CryptoError(.keyringIO, "cannot fsync the keyring file: \(Self.errnoText(errno))")
            }
        }
        guard rename(temporaryPath, path) == 0 else {
            throw CryptoError(.keyringIO, "cannot move the keyring file to \(path): \(Self.errnoText(errno))")
        }
        renamed = true
        // The rename is durable only once the directory is synced. Until then a power cut can bring the old
        // name back: its bytes must still be there, so they are destroyed only after this sync succeeded. A failed
        // sync is never retried (a second fsync can report success for data the first one lost): the old bytes
        // are kept and the caller is told that the new file is in place but not known to be on disk.
        let directoryDescriptor = systemOpen(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryDescriptor >= 0 else {
            throw CryptoError(
                .keyringNotDurable,
                "the new keyring file is in place at \(path), but \(directory) could not be opened to sync it "
                    + "(\(Self.errnoText(errno))): it may not survive a power cut; the old file's bytes were kept"
            )
        }
        defer { _ = systemClose(directoryDescriptor) }
        guard fsync(directoryDescriptor) == 0 else {
            throw CryptoError(
                .keyringNotDurable,
                "the new keyring file is in place at \(path), but syncing \(directory) failed "
                    + "(\(Self.errnoText(errno))): it may not survive a power cut; the old file's bytes were kept"
            )
        }
        if old >= 0 { Self.overwrite(old, size: Int(existing.st_size)) }
    }

    /// The file's bytes, assembled in ``SecretBytes`` (the secrets are base64-encoded by `sodium_bin2base64`
    /// straight into it). Format version 1 for a plain keyring, 2 (id and custody lines; wrapped secret keys only)
    /// for a keyring in custody.
    func fileContents() -> SecretBytes {
        var pieces: [SecretBytes] = []
        func text(_ string: String) { pieces.append(SecretBytes(copying: Array(string.utf8))) }
        if let custody, let id {
            text(
                "profile-escrow-keyring 2\nid \(Hex.encode(id))\ncustody \(custody.fileFields.joined(separator: " "))\n"
            )
        } else {
            text("profile-escrow-keyring 1\n")
        }
        text("mode \(isPublicOnly ? "public-only" : "full")\nactive \(activeVersion)\n")
        text("index-key ")
        pieces.append(Self.base64(indexKey))
        text("\nrow-key ")
        pieces.append(Self.base64(rowKey))
        text("\n")
        for key in masterKeys {
            let seconds = Int64(key.createdAt.timeIntervalSince1970.rounded(.down))
            text("key \(key.version) \(seconds) ")
            pieces.append(Self.base64(SecretBytes(copying: key.publicKey)))
            if custody != nil {
                if let wrapped = key.wrappedSecretKey {
                    text(" ")
                    pieces.append(Self.base64(SecretBytes(copying: wrapped)))
                    text("\n")
                } else {
                    text(" -\n")
                }
            } else if let secretKey = key.secretKey {
                text(" ")
                pieces.append(Self.base64(secretKey))
                text("\n")
            } else {
                text(" -\n")
            }
        }
        let contents = SecretBytes(count: pieces.reduce(0) { $0 + $1.count })
        contents.withUnsafeMutableBytes { buffer in
            var writer = ByteWriter(buffer)
            for piece in pieces {
                piece.withUnsafeBytes { writer.append($0) }
            }
        }
        return contents
    }

    /// Standard base64 with padding, without the terminating NUL.
    private static func base64(_ secret: SecretBytes) -> SecretBytes {
        let encodedCount = (secret.count + 2) / 3 * 4
        let encoded = SecretBytes(count: encodedCount + 1)
        encoded.withUnsafeMutableBytes { output in
            secret.withUnsafeBytes { input in
                _ = sodium_bin2base64(
                    output.baseAddress!.assumingMemoryBound(to: CChar.self),
                    output.count,
                    input.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    input.count,
                    Int32(sodium_base64_VARIANT_ORIGINAL)
                )
            }
        }
        return encoded.withUnsafeBytes { SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[0..<encodedCount])) }
    }

    /// Splits a path into its directory (`.` when none) and its last component.
    /// `path` with symbolic links resolved (the file they point to), or `path` itself when it is no link.
    /// A dangling link resolves to its target's path, created by the write.
    private static func resolvingSymbolicLinks(_ path: String) throws(CryptoError) -> String {
        var resolved = path
        for _ in 0..<16 {
            var info = stat()
            guard lstat(resolved, &info) == 0, info.st_mode & 0o170000 == 0o120000 else { return resolved }
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let count = readlink(resolved, &buffer, Int(PATH_MAX))
            guard count > 0 else {
                throw CryptoError(.keyringIO, "cannot read the link \(resolved): \(errnoText(errno))")
            }
            let target = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            resolved = target.hasPrefix("/") ? target : split(resolved).directory + "/" + target
        }
        throw CryptoError(.keyringIO, "the keyring path \(path) is a loop of symbolic links")
    }

    /// Overwrites `size` bytes of an open file with zeros and syncs them: best effort, the new keyring is
    /// already in place.
    private static func overwrite(_ descriptor: Int32, size: Int) {
        let zeros = [UInt8](repeating: 0, count: 4096)
        var offset = 0
        while offset < size {
            let count = min(zeros.count, size - offset)
            let written = zeros.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, count, off_t(offset)) }
            if written <= 0 { break }
            offset += written
        }
        _ = fsync(descriptor)
    }

    private static func split(_ path: String) -> (directory: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let directory = String(path[..<slash])
        return (directory.isEmpty ? "/" : directory, String(path[path.index(after: slash)...]))
    }

    private static func octal(_ mode: UInt32) -> String {
        let digits = String(mode, radix: 8)
        return String(repeating: "0", count: Swift.max(0, 4 - digits.count)) + digits
    }

    private static func errnoText(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}

// File-scope wrappers: inside `Keyring`, `open`, `write` and `close` would resolve to its own members.

private func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 {
    open(path, flags, mode)
}

private func systemClose(_ descriptor: Int32) -> Int32 {
    close(descriptor)
}

private func systemRead(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
    read(descriptor, buffer, count)
}

private func systemWrite(_ descriptor: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    write(descriptor, buffer, count)
}
