internal import CSodium

/// Hash, MAC and randomness helpers over libsodium, for the rest of ProfileEscrow (audit chain, token hashes,
/// webhook signatures, ids).
public enum Hashing {
    /// Unkeyed BLAKE2b with a 32-byte output (`crypto_generichash`).
    public static func blake2b256(_ data: some Collection<UInt8>) -> [UInt8] {
        Sodium.ensureInitialized()
        var output = [UInt8](repeating: 0, count: 32)
        withContiguousBytes(data) { input in
            _ = crypto_generichash(&output, 32, input.baseAddress, UInt64(input.count), nil, 0)
        }
        return output
    }

    /// SHA-256 (`crypto_hash_sha256`): for Content-Security-Policy hashes of a page's own styles.
    public static func sha256(_ data: some Collection<UInt8>) -> [UInt8] {
        Sodium.ensureInitialized()
        var output = [UInt8](repeating: 0, count: 32)
        withContiguousBytes(data) { input in
            _ = crypto_hash_sha256(&output, input.baseAddress, UInt64(input.count))
        }
        return output
    }

    /// HMAC-SHA-256 (RFC 2104) with a key of any length (`crypto_auth_hmacsha256_init/update/final`).
    public static func hmacSHA256(key: some Collection<UInt8>, message: some Collection<UInt8>) -> [UInt8] {
        Sodium.ensureInitialized()
        let stateSize = crypto_auth_hmacsha256_statebytes()
        let state = UnsafeMutableRawPointer.allocate(byteCount: stateSize, alignment: 64)
        defer {
            sodium_memzero(state, stateSize)
            state.deallocate()
        }
        let typedState = state.bindMemory(to: crypto_auth_hmacsha256_state.self, capacity: 1)
        var output = [UInt8](repeating: 0, count: Int(crypto_auth_hmacsha256_bytes()))
        withContiguousBytes(key) { keyBytes in
            _ = crypto_auth_hmacsha256_init(typedState, keyBytes.baseAddress!, keyBytes.count)
        }
        withContiguousBytes(message) { messageBytes in
            _ = crypto_auth_hmacsha256_update(typedState, messageBytes.baseAddress!, UInt64(messageBytes.count))
        }
        _ = crypto_auth_hmacsha256_final(typedState, &output)
        return output
    }

    /// `count` bytes from the system CSPRNG (`randombytes_buf`). Not for secrets: use ``SecretBytes/random(count:)``.
    public static func randomBytes(count: Int) -> [UInt8] {
        Sodium.ensureInitialized()
        var bytes = [UInt8](repeating: 0, count: count)
        if count > 0 {
            randombytes_buf(&bytes, count)
        }
        return bytes
    }

    /// Constant-time equality (`sodium_memcmp`); `false` when the lengths differ.
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        Sodium.ensureInitialized()
        guard a.count == b.count else { return false }
        guard !a.isEmpty else { return true }
        return sodium_memcmp(a, b, a.count) == 0
    }

    /// Calls `body` with the collection's bytes in contiguous memory (copying only when the collection has none),
    /// always with a non-nil base address, even when empty, as libsodium's non-null parameters need.
    static func withContiguousBytes<R>(
        _ data: some Collection<UInt8>,
        _ body: (UnsafeRawBufferPointer) -> R
    ) -> R {
        if data.isEmpty {
            var placeholder: UInt8 = 0
            return Swift.withUnsafeBytes(of: &placeholder) { body(UnsafeRawBufferPointer(rebasing: $0[0..<0])) }
        }
        if let result = data.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        return Array(data).withUnsafeBytes(body)
    }
}
