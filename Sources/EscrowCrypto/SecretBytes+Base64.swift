internal import CSodium

extension SecretBytes {
    /// Standard base64 with padding (`sodium_base64_VARIANT_ORIGINAL`) of these bytes, itself secret.
    package func base64Encoded() -> SecretBytes {
        let encodedCount = (count + 2) / 3 * 4
        let encoded = SecretBytes(count: encodedCount + 1)
        encoded.withUnsafeMutableBytes { output in
            withUnsafeBytes { input in
                _ = sodium_bin2base64(
                    output.baseAddress!.assumingMemoryBound(to: CChar.self),
                    output.count,
                    input.baseAddress.map { $0.assumingMemoryBound(to: UInt8.self) },
                    input.count,
                    Int32(sodium_base64_VARIANT_ORIGINAL)
                )
            }
        }
        return encoded.withUnsafeBytes { SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[0..<encodedCount])) }
    }

    /// Decodes strict standard base64 (the whole of `text`) straight into secret memory; nil when malformed or
    /// longer than `maximum` bytes.
    package static func decodingBase64(_ text: UnsafeRawBufferPointer, maximum: Int) -> SecretBytes? {
        guard let start = text.baseAddress else { return nil }
        let scratch = SecretBytes(count: maximum)
        let decoded = scratch.withUnsafeMutableBytes { output -> Int? in
            var decodedCount = 0
            var end: UnsafePointer<CChar>?
            let status = sodium_base642bin(
                output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                output.count,
                start.assumingMemoryBound(to: CChar.self),
                text.count,
                nil,
                &decodedCount,
                &end,
                Int32(sodium_base64_VARIANT_ORIGINAL)
            )
            let whole = end == UnsafePointer(start.assumingMemoryBound(to: CChar.self) + text.count)
            return status == 0 && whole ? decodedCount : nil
        }
        guard let decoded else { return nil }
        return scratch.withUnsafeBytes { SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[0..<decoded])) }
    }
}
