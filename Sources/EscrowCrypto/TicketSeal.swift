internal import CSodium

/// Seals a web sign-in's result under a key derived from its single-use ticket (`crypto_secretbox`, XSalsa20-Poly1305,
/// a random nonce before the ciphertext): the store keeps the sealed bytes and the ticket's hash only, so a copy of
/// the database opens nothing.
public enum TicketSeal {
    static let context = Array("profile-escrow signin ticket result v1".utf8)

    public static func seal(_ plaintext: [UInt8], ticket: [UInt8]) -> [UInt8] {
        Sodium.ensureInitialized()
        var key = Hashing.hmacSHA256(key: ticket, message: context)
        defer { sodium_memzero(&key, key.count) }
        let nonce = Hashing.randomBytes(count: Int(crypto_secretbox_noncebytes()))
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count + Int(crypto_secretbox_macbytes()))
        Hashing.withContiguousBytes(plaintext) { message in
            _ = crypto_secretbox_easy(
                &ciphertext,
                message.baseAddress!.assumingMemoryBound(to: UInt8.self),
                UInt64(message.count),
                nonce,
                key
            )
        }
        return nonce + ciphertext
    }

    /// The plaintext; nil when `sealed` was not sealed under this ticket or was changed.
    public static func open(_ sealed: [UInt8], ticket: [UInt8]) -> [UInt8]? {
        Sodium.ensureInitialized()
        let nonceBytes = Int(crypto_secretbox_noncebytes())
        let macBytes = Int(crypto_secretbox_macbytes())
        guard sealed.count >= nonceBytes + macBytes else { return nil }
        var key = Hashing.hmacSHA256(key: ticket, message: context)
        defer { sodium_memzero(&key, key.count) }
        let nonce = Array(sealed[..<nonceBytes])
        let ciphertext = Array(sealed[nonceBytes...])
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count - macBytes)
        let result = crypto_secretbox_open_easy(&plaintext, ciphertext, UInt64(ciphertext.count), nonce, key)
        return result == 0 ? plaintext : nil
    }
}
