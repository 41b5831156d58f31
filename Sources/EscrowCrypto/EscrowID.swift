public import Foundation

/// The identifier of one escrow: 16 bytes, written as 32 lowercase hex characters.
///
/// A new escrow's id (``new(at:)``) is the capture time, 6 bytes of Unix milliseconds, then 10 bytes from the
/// CSPRNG: unguessable, and in time order, so that the escrows captured (and later replayed and purged) together
/// sit together in the store's indexes. It is not personal data and says nothing the escrow's audit events do not
/// (their times): it appears in logs, audit events and the `Idempotency-Key` header.
public struct EscrowID: Hashable, Sendable, CustomStringConvertible {
    /// The number of bytes in an escrow id.
    public static let byteCount = 16

    /// The 16 id bytes.
    public let bytes: [UInt8]

    /// The id of an escrow captured at `date`: its Unix time in milliseconds as 6 big-endian bytes (times before
    /// 1970 as 0), then 10 random bytes (`randombytes_buf`).
    ///
    /// Why not 16 random bytes: every capture inserts the id into the store's index of ids, and every purge
    /// deletes it with three audit events indexed by it; at random positions each of them dirtied a page of its
    /// own (measured with `strace -c` of `replay --once` on SQLite: 9.7 `pwrite` and 4.6 `pread` calls per
    /// escrow; with ids in time order, 5.2 and 1.2).
    public static func new(at date: Date) -> EscrowID {
        let milliseconds = UInt64(max(0, min(date.timeIntervalSince1970 * 1000, Double(1 << 48 - 1))))
        var bytes = (0..<6).map { UInt8(truncatingIfNeeded: milliseconds >> (8 * (5 - $0))) }
        bytes += Hashing.randomBytes(count: byteCount - 6)
        return EscrowID(validBytes: bytes)
    }

    /// A fresh id of 16 random bytes (`randombytes_buf`), in no order.
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
