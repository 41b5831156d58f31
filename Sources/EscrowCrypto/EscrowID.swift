/// The random identifier of one escrow: 16 bytes from the CSPRNG, written as 32 lowercase hex characters.
///
/// It is not personal data: it appears in logs, audit events and the `Idempotency-Key` header.
public struct EscrowID: Hashable, Sendable, CustomStringConvertible {
    /// The number of bytes in an escrow id.
    public static let byteCount = 16

    /// The 16 id bytes.
    public let bytes: [UInt8]

    /// A fresh random id (`randombytes_buf`).
    public static func random() -> EscrowID {
        EscrowID(validBytes: Hashing.randomBytes(count: byteCount))
    }

    /// Parses the 32-character hex form (lowercase canonical; uppercase accepted). `nil` for anything else.
    public init?(hex: String) {
        guard hex.utf8.count == Self.byteCount * 2, let bytes = Hex.decode(hex) else { return nil }
        self.bytes = bytes
    }

    /// Wraps exactly 16 bytes; `nil` for any other length.
    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    private init(validBytes: [UInt8]) {
        self.bytes = validBytes
    }

    /// The text form: 32 lowercase hex characters.
    public var hex: String { Hex.encode(bytes) }

    /// The same as ``hex``.
    public var description: String { hex }
}

extension EscrowID: Codable {
    /// Decodes the hex text form.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let id = EscrowID(hex: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a 32-character hex escrow id")
        }
        self = id
    }

    /// Encodes the hex text form.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(hex)
    }
}
