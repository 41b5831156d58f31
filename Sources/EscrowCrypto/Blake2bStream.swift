internal import CSodium

/// Unkeyed BLAKE2b-256 over bytes that arrive in pieces (`crypto_generichash_init/update/final`): the same digest as
/// ``Hashing/blake2b256(_:)`` over their concatenation, without holding them all (an archived audit segment's file
/// hash over gigabytes).
public final class Blake2bStream {
    // libsodium's state is a 64-byte-aligned struct that Swift imports as an opaque pointer.
    private let memory: UnsafeMutableRawPointer
    private var state: OpaquePointer { OpaquePointer(memory) }

    public init() {
        Sodium.ensureInitialized()
        memory = .allocate(byteCount: crypto_generichash_statebytes(), alignment: 64)
        _ = crypto_generichash_init(state, nil, 0, 32)
    }

    deinit { memory.deallocate() }

    public func update(_ bytes: some Collection<UInt8>) {
        Hashing.withContiguousBytes(bytes) { buffer in
            guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
            _ = crypto_generichash_update(state, base.assumingMemoryBound(to: UInt8.self), UInt64(buffer.count))
        }
    }

    /// The digest of everything given so far. The stream takes nothing more after this.
    public func finish() -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        _ = crypto_generichash_final(state, &output, 32)
        return output
    }
}
