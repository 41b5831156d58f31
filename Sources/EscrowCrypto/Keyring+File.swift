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
        let descriptor = systemOpen(path, O_RDONLY | O_CLOEXEC)
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
    /// Creates the directory (mode 0700) when missing, writes a temporary file in it (`O_CREAT | O_EXCL`, 0600),
    /// `fsync`s it, renames it over `path` and `fsync`s the directory. Throws ``CryptoError/Code/keyringExists``
    /// when `path` exists and `overwrite` is false.
    public func write(path: String, overwrite: Bool) throws(CryptoError) {
        Sodium.ensureInitialized()
        let (directory, name) = Self.split(path)
        guard !name.isEmpty, name != ".", name != ".." else {
            throw CryptoError(.keyringIO, "the keyring path \(path) does not name a file")
        }
        do {
            try OwnerOnlyDirectory.create(directory)
        } catch {
            throw CryptoError(.keyringIO, error.description)
        }
        if !overwrite {
            var existing = stat()
            if lstat(path, &existing) == 0 {
                throw CryptoError(.keyringExists, "a keyring file already exists at \(path); it was not overwritten")
            }
        }

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
        let directoryDescriptor = systemOpen(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryDescriptor >= 0 else {
            throw CryptoError(.keyringIO, "cannot open \(directory) to fsync it: \(Self.errnoText(errno))")
        }
        defer { _ = systemClose(directoryDescriptor) }
        guard fsync(directoryDescriptor) == 0 else {
            throw CryptoError(.keyringIO, "cannot fsync the directory \(directory): \(Self.errnoText(errno))")
        }
    }

    /// The file's bytes, assembled in ``SecretBytes`` (the secrets are base64-encoded by `sodium_bin2base64`
    /// straight into it).
    func fileContents() -> SecretBytes {
        var pieces: [SecretBytes] = []
        func text(_ string: String) { pieces.append(SecretBytes(copying: Array(string.utf8))) }
        text("profile-escrow-keyring 1\nmode \(isPublicOnly ? "public-only" : "full")\nactive \(activeVersion)\n")
        text("index-key ")
        pieces.append(Self.base64(indexKey))
        text("\nrow-key ")
        pieces.append(Self.base64(rowKey))
        text("\n")
        for key in masterKeys {
            let seconds = Int64(key.createdAt.timeIntervalSince1970.rounded(.down))
            text("key \(key.version) \(seconds) ")
            pieces.append(Self.base64(SecretBytes(copying: key.publicKey)))
            if let secretKey = key.secretKey {
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
