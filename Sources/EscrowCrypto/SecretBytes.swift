internal import CSodium

/// A buffer of secret bytes in `sodium_malloc`'ed memory (guard pages, locked when the system allows it),
/// recycled through ``SecretBufferPool`` (zeroed before it is reused).
///
/// The buffer has exactly one owner; it is zeroed and freed in `deinit`, and nowhere else. Its bytes are reachable
/// only through ``withUnsafeBytes(_:)`` and ``withUnsafeMutableBytes(_:)``: they never appear in a `description`,
/// a debug description or a mirror. Equality is constant time (`sodium_memcmp`).
///
/// `SecretBytes` is `Sendable` for sharing immutable secrets (keys, decrypted plaintexts). Mutating it through
/// ``withUnsafeMutableBytes(_:)`` while another thread reads it is a data race: mutate only while you own it alone.
public final class SecretBytes: @unchecked Sendable {
    private let pointer: UnsafeMutableRawPointer
    /// The size of the `sodium_malloc`'ed buffer behind `pointer` (at least `count`; see ``SecretBufferPool``).
    private let capacity: Int
    /// The number of secret bytes.
    public let count: Int

    /// Allocates `count` zero bytes.
    public init(count: Int) {
        precondition(count >= 0, "SecretBytes count must not be negative")
        Sodium.ensureInitialized()
        let buffer = SecretBufferPool.take(count: count)
        self.pointer = buffer.pointer
        self.capacity = buffer.capacity
        self.count = count
    }

    /// Copies `bytes` into a new secret buffer. The source stays the caller's to wipe.
    public convenience init(copying bytes: some Collection<UInt8>) {
        self.init(count: bytes.count)
        let destination = UnsafeMutableRawBufferPointer(start: pointer, count: count)
        let copied = bytes.withContiguousStorageIfAvailable { source -> Bool in
            if let base = source.baseAddress, source.count > 0 {
                destination.baseAddress!.copyMemory(from: base, byteCount: source.count)
            }
            return true
        }
        if copied == nil {
            for (offset, byte) in zip(destination.indices, bytes) {
                destination[offset] = byte
            }
        }
    }

    /// A buffer of `count` bytes from the system CSPRNG (`randombytes_buf`).
    public static func random(count: Int) -> SecretBytes {
        let secret = SecretBytes(count: count)
        if count > 0 {
            randombytes_buf(secret.pointer, count)
        }
        return secret
    }

    deinit {
        // Only the first `count` bytes were ever reachable, so they are the only ones to zero; the buffer
        // goes back to the pool all zeroes (or is freed).
        sodium_memzero(pointer, count)
        SecretBufferPool.give(pointer, capacity: capacity)
    }

    /// Calls `body` with read-only access to the secret bytes. Do not let the pointer escape.
    /// (Typed throws: a non-throwing body makes the call non-throwing, as `rethrows` would.)
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Calls `body` with write access to the secret bytes. Do not let the pointer escape.
    public func withUnsafeMutableBytes<R, E: Error>(
        _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        try body(UnsafeMutableRawBufferPointer(start: pointer, count: count))
    }
}

extension SecretBytes: Equatable {
    /// Constant-time comparison (`sodium_memcmp`); buffers of different lengths are unequal.
    public static func == (lhs: SecretBytes, rhs: SecretBytes) -> Bool {
        guard lhs.count == rhs.count else { return false }
        guard lhs.count > 0 else { return true }
        return sodium_memcmp(lhs.pointer, rhs.pointer, lhs.count) == 0
    }
}

extension SecretBytes: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Always `SecretBytes(redacted)`: never the bytes, never their length.
    public var description: String { "SecretBytes(redacted)" }
    /// Always `SecretBytes(redacted)`.
    public var debugDescription: String { "SecretBytes(redacted)" }
    /// A mirror with no children, so `dump` and reflection show nothing secret.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .class) }
}
