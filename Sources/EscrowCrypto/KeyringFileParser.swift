internal import CSodium
internal import Foundation

/// Parses the keyring file format (`docs/FORMAT.md`) from a ``SecretBytes`` buffer without ever copying a secret
/// into a Swift `String` or `Array`: secret tokens go through `sodium_base642bin` straight into ``SecretBytes``.
///
/// Errors name the line number and what was expected there, never the line's content.
package struct KeyringFileParser {
    private let buffer: UnsafeRawBufferPointer
    private let path: String

    package init(buffer: UnsafeRawBufferPointer, path: String) {
        self.buffer = buffer
        self.path = path
    }

    /// A token: a byte range of the buffer.
    private typealias Token = Range<Int>

    package func parse() throws(CryptoError) -> Keyring {
        let lines = try splitLines()
        let header = tokens(lines, 0)
        guard header.count == 2, equals(header[0], "profile-escrow-keyring"),
            equals(header[1], "1") || equals(header[1], "2")
        else {
            throw malformed(line: 1, "expected `profile-escrow-keyring 1` or `profile-escrow-keyring 2`")
        }
        // Format 2 (a keyring in custody) has two more lines after the header: `id` and `custody`.
        var custody: KeyCustody?
        var id: [UInt8]?
        var first = 1
        if equals(header[1], "2") {
            let idLine = tokens(lines, 1)
            guard idLine.count == 2, equals(idLine[0], "id"), let decoded = Hex.decode(text(idLine[1])),
                decoded.count == Keyring.idByteCount
            else { throw malformed(line: 2, "expected `id <32 hex digits>`") }
            id = decoded
            custody = try custodyLine(tokens(lines, 2), line: 3)
            first = 3
        }
        let modeLine = tokens(lines, first)
        guard modeLine.count == 2, equals(modeLine[0], "mode"),
            equals(modeLine[1], "full") || (custody == nil && equals(modeLine[1], "public-only"))
        else {
            throw malformed(
                line: first + 1,
                custody == nil ? "expected `mode full` or `mode public-only`" : "expected `mode full`"
            )
        }
        let isPublicOnly = equals(modeLine[1], "public-only")
        let activeLine = tokens(lines, first + 1)
        guard activeLine.count == 2, equals(activeLine[0], "active"), let active = version(activeLine[1]) else {
            throw malformed(line: first + 2, "expected `active <version>`")
        }
        let indexKey = try namedSecret(tokens(lines, first + 2), name: "index-key", line: first + 3)
        let rowKey = try namedSecret(tokens(lines, first + 3), name: "row-key", line: first + 4)
        guard lines.count > first + 4 else {
            throw malformed(line: first + 5, "expected at least one `key` line")
        }

        var masterKeys: [Keyring.MasterKey] = []
        for (offset, range) in lines.enumerated().dropFirst(first + 4) {
            let key = try masterKey(range, line: offset + 1, isPublicOnly: isPublicOnly, wrapped: custody != nil)
            if let previous = masterKeys.last, key.version <= previous.version {
                throw malformed(line: offset + 1, "key versions must be strictly ascending")
            }
            masterKeys.append(key)
        }
        guard let activeKey = masterKeys.first(where: { $0.version == active }) else {
            throw malformed(line: first + 2, "the active version has no `key` line")
        }
        guard isPublicOnly || activeKey.secretKey != nil || activeKey.wrappedSecretKey != nil else {
            throw malformed(line: first + 2, "the active version has no secret key in a `mode full` keyring")
        }
        return Keyring(
            masterKeys: masterKeys,
            activeVersion: active,
            indexKey: indexKey,
            rowKey: rowKey,
            isPublicOnly: isPublicOnly,
            custody: custody,
            id: id
        )
    }

    /// `custody transit <url> <mount> <key> <CA file or ->` or `custody pkcs11 <module> <token> <key>`, each
    /// value percent-encoded.
    private func custodyLine(_ fields: [Token], line: Int) throws(CryptoError) -> KeyCustody {
        let expectation =
            "expected `custody transit <url> <mount> <key> <CA file or ->` or `custody pkcs11 <module> <token> <key>`"
        guard fields.count >= 2, equals(fields[0], "custody") else { throw malformed(line: line, expectation) }
        let values = fields.dropFirst(2).map { KeyCustody.decodeField(bytes($0)) }
        guard !values.contains(where: { $0 == nil }) else { throw malformed(line: line, expectation) }
        let custody: KeyCustody
        if equals(fields[1], "transit"), values.count == 4 {
            custody = .transit(
                KeyCustody.Transit(
                    address: values[0]!,
                    mount: values[1]!,
                    key: values[2]!,
                    caFile: equals(fields[5], "-") ? nil : values[3]!
                )
            )
        } else if equals(fields[1], "pkcs11"), values.count == 3 {
            custody = .pkcs11(KeyCustody.PKCS11(module: values[0]!, token: values[1]!, key: values[2]!))
        } else {
            throw malformed(line: line, expectation)
        }
        if case .transit(let transit) = custody, let refusal = transit.cleartextRefusal {
            throw CryptoError(
                .keyringMalformed,
                "keyring file \(path): line \(line) is refused: \(refusal); change the address on that `custody` line "
                    + "(it is not bound into the wrapped keys)"
            )
        }
        do {
            try custody.validate()
        } catch {
            throw malformed(line: line, expectation)
        }
        return custody
    }

    private func bytes(_ token: Token) -> [UInt8] { Array(buffer[token]) }

    private func text(_ token: Token) -> String { String(decoding: buffer[token], as: UTF8.self) }

    /// `key <version> <createdAt> <public key> <secret key | ->`
    private func masterKey(
        _ range: Range<Int>,
        line: Int,
        isPublicOnly: Bool,
        wrapped: Bool
    ) throws(CryptoError) -> Keyring.MasterKey {
        let expectation =
            wrapped
            ? "expected `key <version> <created unix seconds> <public key base64> <wrapped secret key base64 or ->`"
            : "expected `key <version> <created unix seconds> <public key base64> <secret key base64 or ->`"
        let fields = tokens(range)
        guard fields.count == 5, equals(fields[0], "key"), let version = version(fields[1]),
            // At most the last second of year 9999: every later step (dates, RFC 3339, the file written back)
            // stays in range.
            let seconds = unsignedInteger(fields[2], maximum: Self.latestCreatedAt)
        else { throw malformed(line: line, expectation) }
        let publicKey = SecretBytes(count: Sodium.boxPublicKeyBytes)
        guard decodeBase64(fields[3], into: publicKey) else { throw malformed(line: line, expectation) }
        let publicKeyBytes = publicKey.withUnsafeBytes { Array($0) }

        var secretKey: SecretBytes?
        if wrapped {
            // Not a secret (it opens nothing without the engine): an opaque blob of at most 1 KiB.
            var blob: [UInt8]?
            if !equals(fields[4], "-") {
                guard let decoded = decodeBase64(fields[4], maximum: Self.maximumWrappedSize) else {
                    throw malformed(line: line, expectation)
                }
                blob = decoded
            }
            return Keyring.MasterKey(
                version: version,
                publicKey: publicKeyBytes,
                secretKey: nil,
                createdAt: Date(timeIntervalSince1970: TimeInterval(seconds)),
                wrappedSecretKey: blob
            )
        }
        if !equals(fields[4], "-") {
            guard !isPublicOnly else {
                throw malformed(line: line, "a `mode public-only` keyring must not hold a secret key (use -)")
            }
            let secret = SecretBytes(count: Sodium.boxSecretKeyBytes)
            guard decodeBase64(fields[4], into: secret) else { throw malformed(line: line, expectation) }
            guard Self.secretKey(secret, matches: publicKeyBytes) else {
                throw malformed(line: line, "the secret key does not belong to the public key")
            }
            secretKey = secret
        }
        return Keyring.MasterKey(
            version: version,
            publicKey: publicKeyBytes,
            secretKey: secretKey,
            createdAt: Date(timeIntervalSince1970: TimeInterval(seconds))
        )
    }

    /// `<name> <base64 of 32 bytes>`
    private func namedSecret(_ fields: [Token], name: String, line: Int) throws(CryptoError) -> SecretBytes {
        let secret = SecretBytes(count: 32)
        guard fields.count == 2, equals(fields[0], name), decodeBase64(fields[1], into: secret) else {
            throw malformed(line: line, "expected `\(name) <base64 of 32 bytes>`")
        }
        return secret
    }

    /// Lines without their `\n`; the file must end with `\n` and hold no empty line and no `\r`.
    private func splitLines() throws(CryptoError) -> [Range<Int>] {
        var lines: [Range<Int>] = []
        var start = 0
        for index in buffer.indices where buffer[index] == UInt8(ascii: "\n") {
            lines.append(start..<index)
            start = index + 1
        }
        if start != buffer.count {
            throw malformed(line: lines.count + 1, "the last line does not end with a newline")
        }
        for (offset, line) in lines.enumerated() {
            if line.isEmpty { throw malformed(line: offset + 1, "empty line") }
            if line.contains(where: { buffer[$0] == UInt8(ascii: "\r") }) {
                throw malformed(line: offset + 1, "carriage return; lines must end with \\n only")
            }
        }
        return lines
    }

    /// The tokens of line `index` (0-based), none when the file is shorter.
    private func tokens(_ lines: [Range<Int>], _ index: Int) -> [Token] {
        index < lines.count ? tokens(lines[index]) : []
    }

    /// Tokens separated by single spaces; an empty token (double, leading or trailing space) is kept, so that
    /// the field count check rejects the line.
    private func tokens(_ line: Range<Int>) -> [Token] {
        var result: [Token] = []
        var start = line.lowerBound
        for index in line where buffer[index] == UInt8(ascii: " ") {
            result.append(start..<index)
            start = index + 1
        }
        result.append(start..<line.upperBound)
        return result.contains(where: \.isEmpty) ? [] : result
    }

    private func equals(_ token: Token, _ word: String) -> Bool {
        let utf8 = Array(word.utf8)
        return token.count == utf8.count && zip(token, utf8).allSatisfy { buffer[$0] == $1 }
    }

    /// A version: decimal, 1 ... UInt32.max, no sign and no leading zero.
    private func version(_ token: Token) -> UInt32? {
        guard let value = unsignedInteger(token, maximum: UInt64(UInt32.max)), value >= 1 else { return nil }
        return UInt32(value)
    }

    /// Decimal digits only, no leading zero (but "0"), at most `maximum`.
    /// 9999-12-31T23:59:59Z, the latest creation time a key may carry.
    static let latestCreatedAt: UInt64 = 253_402_300_799

    private func unsignedInteger(_ token: Token, maximum: UInt64) -> UInt64? {
        guard !token.isEmpty, token.count <= 20 else { return nil }
        if token.count > 1, buffer[token.lowerBound] == UInt8(ascii: "0") { return nil }
        var value: UInt64 = 0
        for index in token {
            let byte = buffer[index]
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { return nil }
            value = sum
        }
        return value <= maximum ? value : nil
    }

    /// Strict standard base64 with padding (`sodium_base64_VARIANT_ORIGINAL`) that must decode to exactly
    /// `destination.count` bytes and use the whole token.
    private func decodeBase64(_ token: Token, into destination: SecretBytes) -> Bool {
        let start = buffer.baseAddress!.advanced(by: token.lowerBound).assumingMemoryBound(to: CChar.self)
        return destination.withUnsafeMutableBytes { output in
            var decodedCount = 0
            var end: UnsafePointer<CChar>?
            let status = sodium_base642bin(
                output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                output.count,
                start,
                token.count,
                nil,
                &decodedCount,
                &end,
                Int32(sodium_base64_VARIANT_ORIGINAL)
            )
            return status == 0 && decodedCount == output.count && end == UnsafePointer(start + token.count)
        }
    }

    /// The largest wrapped secret key accepted.
    static let maximumWrappedSize = 1024

    /// Strict standard base64 of 1 ... `maximum` bytes that uses the whole token.
    private func decodeBase64(_ token: Token, maximum: Int) -> [UInt8]? {
        guard token.count <= (maximum + 2) / 3 * 4 else { return nil }
        let start = buffer.baseAddress!.advanced(by: token.lowerBound).assumingMemoryBound(to: CChar.self)
        var output = [UInt8](repeating: 0, count: maximum)
        var decodedCount = 0
        var end: UnsafePointer<CChar>?
        let status = sodium_base642bin(
            &output,
            output.count,
            start,
            token.count,
            nil,
            &decodedCount,
            &end,
            Int32(sodium_base64_VARIANT_ORIGINAL)
        )
        guard status == 0, decodedCount > 0, end == UnsafePointer(start + token.count) else { return nil }
        return Array(output[0..<decodedCount])
    }

    /// Whether `crypto_scalarmult_base(secretKey) == publicKey`: catches a key line whose halves do not match.
    static func secretKey(_ secretKey: SecretBytes, matches publicKey: [UInt8]) -> Bool {
        var derived = [UInt8](repeating: 0, count: Sodium.boxPublicKeyBytes)
        let status = secretKey.withUnsafeBytes { secret in
            crypto_scalarmult_base(&derived, secret.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        return status == 0 && Hashing.constantTimeEqual(derived, publicKey)
    }

    private func malformed(line: Int, _ expectation: String) -> CryptoError {
        CryptoError(.keyringMalformed, "keyring file \(path): line \(line) is malformed: \(expectation)")
    }
}
