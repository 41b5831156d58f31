/// The keyed BLAKE2b-256 of a user identifier (see ``Keyring/blindIndex(userIdentifier:)``): how the store finds a
/// user's escrow without ever holding the identifier.
public struct BlindIndex: Hashable, Sendable, CustomStringConvertible {
    /// The number of bytes in a blind index.
    public static let byteCount = 32

    /// The 32 index bytes.
    public let bytes: [UInt8]

    /// Wraps exactly 32 bytes; `nil` for any other length.
    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    /// The first 8 bytes in lowercase hex, for logs and audit events.
    public var prefixHex: String { Hex.encode(bytes.prefix(8)) }

    /// All 32 bytes in lowercase hex.
    public var hex: String { Hex.encode(bytes) }

    /// `BlindIndex(<prefixHex>…)`: only the prefix, as in logs.
    public var description: String { "BlindIndex(\(prefixHex)…)" }
}
