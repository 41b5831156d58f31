internal import CSodium

/// Unpadded base64url (RFC 4648 §5, the alphabet of JWS and of this service's own tokens, cursors and cookies), by
/// libsodium's codec (`sodium_bin2base64` and `sodium_base642bin` with `sodium_base64_VARIANT_URLSAFE_NO_PADDING`).
/// Decoding is strict: a byte outside the alphabet, padding, an impossible length or leftover bits that are not
/// zero (so that a value has one encoding) make nil.
package enum Base64URL {
    package static func encode(_ bytes: [UInt8]) -> String {
        let variant = Int32(sodium_base64_VARIANT_URLSAFE_NO_PADDING)
        // The length libsodium asks for includes the terminating NUL.
        var encoded = [CChar](repeating: 0, count: sodium_base64_encoded_len(bytes.count, variant))
        bytes.withUnsafeBufferPointer { input in
            _ = sodium_bin2base64(&encoded, encoded.count, input.baseAddress, input.count, variant)
        }
        return String(decoding: encoded.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    package static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        if let decoded = text.withContiguousStorageIfAvailable({ decode($0) }) { return decoded }
        return Array(text).withUnsafeBufferPointer { decode($0) }
    }

    private static func decode(_ text: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard let start = text.baseAddress else { return [] }
        var output = [UInt8](repeating: 0, count: text.count * 3 / 4 + 1)
        var decodedCount = 0
        var end: UnsafePointer<CChar>?
        let characters = UnsafeRawPointer(start).assumingMemoryBound(to: CChar.self)
        let status = sodium_base642bin(
            &output,
            output.count,
            characters,
            text.count,
            nil,
            &decodedCount,
            &end,
            Int32(sodium_base64_VARIANT_URLSAFE_NO_PADDING)
        )
        // All of `text`, not a prefix of it.
        guard status == 0, end == characters + text.count else { return nil }
        output.removeSubrange(decodedCount...)
        return output
    }
}
