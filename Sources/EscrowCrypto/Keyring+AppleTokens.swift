extension Keyring {
    /// Seals an authorization code for the Apple token exchange's outbox, to the active master key version: the
    /// notification outbox's format (``sealNotification(_:webhookID:)``), bound to `label` (the code's hash in hex) so
    /// that one entry's sealed code cannot be moved to another. Works on a public-only keyring.
    public func sealAppleCode(
        _ code: [UInt8],
        label: String
    ) throws(CryptoError) -> (keyVersion: UInt32, sealed: [UInt8]) {
        try sealNotification(code, webhookID: "apple-code-" + label)
    }

    /// Opens what ``sealAppleCode(_:label:)`` sealed.
    public func openAppleCode(_ sealed: [UInt8], keyVersion: UInt32, label: String) throws(CryptoError) -> [UInt8] {
        try openNotification(sealed, keyVersion: keyVersion, webhookID: "apple-code-" + label)
    }

    /// Seals Apple's tokens (the refresh token an exchange gave) into an escrow, as its profile is: a sealed box to the
    /// escrow's own public key of `"PEA1" || id || blindIndex || tokens`. Only the escrow's secret key opens it, which
    /// only the master key of the row's version opens; a rewrap re-seals that secret key, so the tokens follow the
    /// keyring's rotation with no change of their own, and a purge that deletes the row leaves them unopenable.
    /// Works on a public-only keyring.
    public func sealAppleTokens(_ tokens: SecretBytes, into sealed: SealedEscrow) throws(CryptoError) -> [UInt8] {
        let box = SecretBytes(count: 4 + EscrowID.byteCount + BlindIndex.byteCount + tokens.count)
        box.withUnsafeMutableBytes { buffer in
            var writer = ByteWriter(buffer)
            writer.append(Magic.appleTokens + sealed.id.bytes + sealed.blindIndex.bytes)
            tokens.withUnsafeBytes { writer.append($0) }
        }
        return try Self.sealBox(box, to: sealed.publicKey)
    }

    /// Opens what ``sealAppleTokens(_:into:)`` sealed into `sealed` (whose MAC and key box are checked as ``open(_:)``
    /// checks them). Any failure of the box or its binding is ``CryptoError/Code/ciphertextInvalid``.
    public func openAppleTokens(_ box: [UInt8], of sealed: SealedEscrow) throws(CryptoError) -> SecretBytes {
        let escrowSecretKey = try openKeyBox(sealed)
        let binding = Magic.appleTokens + sealed.id.bytes + sealed.blindIndex.bytes
        guard box.count >= Sodium.sealBytes + binding.count else { throw CryptoError.ciphertextInvalid }
        let opened = SecretBytes(count: box.count - Sodium.sealBytes)
        let valid = opened.withUnsafeMutableBytes { buffer in
            SealedBox.open(box, into: buffer, recipient: sealed.publicKey, secretKey: escrowSecretKey)
                && buffer.prefix(binding.count).elementsEqual(binding)
        }
        guard valid else { throw CryptoError.ciphertextInvalid }
        return opened.withUnsafeBytes { buffer in
            SecretBytes(copying: UnsafeRawBufferPointer(rebasing: buffer[binding.count...]))
        }
    }
}
