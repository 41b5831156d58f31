/// Lowercase hexadecimal encoding and strict decoding of non-secret bytes: ids, blind indexes, public keys,
/// hashes. The one hex codec of the package.
public enum Hex {
    @usableFromInline static let digits: StaticString = "0123456789abcdef"

    /// Inlinable so that each caller gets it specialized for its own collection (an id's array, a prefix's slice):
    /// unspecialized, iterating a generic sequence cost more than the encoding. Written straight into the string's
    /// storage, with no intermediate array.
    @inlinable
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { utf8 in
            digits.withUTF8Buffer { digits in
                var offset = 0
                for byte in bytes {
                    utf8[offset] = digits[Int(byte >> 4)]
                    utf8[offset + 1] = digits[Int(byte & 0x0f)]
                    offset += 2
                }
                return offset
            }
        }
    }

    /// Any other sequence of bytes (a collection takes the inlinable overload above).
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        encode(Array(bytes))
    }

    /// Decodes upper- or lowercase hex; `nil` for an odd length or any other character.
    public static func decode(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func nibble(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
