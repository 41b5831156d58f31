/// Appends bytes into a preallocated buffer (usually a ``SecretBytes``), trapping on overflow.
struct ByteWriter {
    private let buffer: UnsafeMutableRawBufferPointer
    private(set) var offset = 0

    init(_ buffer: UnsafeMutableRawBufferPointer) {
        self.buffer = buffer
    }

    mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        precondition(offset + bytes.count <= buffer.count, "ByteWriter overflow")
        if let base = bytes.baseAddress, bytes.count > 0 {
            (buffer.baseAddress! + offset).copyMemory(from: base, byteCount: bytes.count)
        }
        offset += bytes.count
    }

    mutating func appendBigEndian(_ value: UInt32) {
        append(BigEndian.bytes(value))
    }
}

/// The 4-byte magic prefixes (`docs/FORMAT.md`).
enum Magic {
    /// Profile box plaintext.
    static let profile: [UInt8] = Array("PEP1".utf8)
    /// Key box plaintext.
    static let key: [UInt8] = Array("PEK1".utf8)
    /// Row MAC input.
    static let mac: [UInt8] = Array("PEM1".utf8)
    /// Content tag input.
    static let content: [UInt8] = Array("PEC1".utf8)
    /// Apple tokens sealed to an escrow's own key (the refresh token an exchange gave).
    static let appleTokens: [UInt8] = Array("PEA1".utf8)
    /// Forwarded notification plaintext (the notification outbox).
    static let notification: [UInt8] = Array("PEN1".utf8)
    /// Derivation input of the key that seals an escrow's profile box key (``Keyring/open(_:)``'s shortcut).
    static let profileBoxKey: [UInt8] = Array("PEB1".utf8)
    /// Nonce input of a second box under a sealed box's key (``SealedBox/sealBeside(_:to:using:)``).
    static let besideNonce: [UInt8] = Array("PEX1".utf8)
}
