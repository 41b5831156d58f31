/// The big-endian `u32` of the documented binary formats (`docs/FORMAT.md`: the sealed boxes' binding, the row
/// MAC input, the audit chain's canonical events): written and read here only.
public enum BigEndian {
    /// The four bytes of `value`, most significant first.
    public static func bytes(_ value: UInt32) -> [UInt8] {
        [
            UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16),
            UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value),
        ]
    }

    /// The value of exactly four bytes, most significant first.
    public static func uint32(_ bytes: some Collection<UInt8>) -> UInt32 {
        precondition(bytes.count == 4, "a u32 is four bytes")
        return bytes.reduce(0) { $0 << 8 | UInt32($1) }
    }
}
