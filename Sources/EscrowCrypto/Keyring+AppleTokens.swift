extension Keyring {
    /// Seals a new escrow (``seal(plaintext:id:blindIndex:reserve:)``) and, beside it, the authorization code that came
    /// with its profile, for the token exchange's outbox. The code's plaintext is a forwarded notification's
    /// (``sealNotification(_:webhookID:)``) with the webhook id `apple-code-<label>` (`label`: the code's hash in hex),
    /// so that one entry's sealed code cannot be moved to another. It goes in a second box under the key of the
    /// escrow's key box (``SealedBox/sealBeside(_:to:using:)``: the key box's ephemeral public key, then the box with
    /// its own nonce), so the code costs no X25519 step of its own on a sign-in's answer path, and opens as the key box
    /// does, with the master secret key alone: it needs nothing of the escrow, and stays openable if the capture's
    /// escrow is not the one kept or is rewrapped. Without a code, the escrow alone. Works on a public-only
    /// keyring.
    public func seal(
        plaintext: SecretBytes,
        id: EscrowID,
        blindIndex: BlindIndex,
        reserve: SealingKeyReserve? = nil,
        appleCode: (code: SecretBytes, label: String)?
    ) throws(CryptoError) -> (escrow: SealedEscrow, appleCode: (keyVersion: UInt32, sealed: [UInt8])?) {
        let (sealed, keys, masterPublicKey) = try sealKeepingKeys(
            plaintext: plaintext,
            id: id,
            blindIndex: blindIndex,
            x25519: SealedBox.defaultX25519,
            reserve: reserve
        )
        guard let (code, label) = appleCode else { return (sealed, nil) }
        let binding = Self.notificationBinding("apple-code-" + label, version: sealed.keyVersion)
        let codePlaintext = SecretBytes(count: binding.count + code.count)
        codePlaintext.withUnsafeMutableBytes { buffer in
            var writer = ByteWriter(buffer)
            writer.append(binding)
            code.withUnsafeBytes { writer.append($0) }
        }
        let sealedCode = codePlaintext.withUnsafeBytes {
            SealedBox.sealBeside($0, to: masterPublicKey, using: keys.keyBox)
        }
        return (sealed, (sealed.keyVersion, sealedCode))
    }

    /// Opens a code that ``seal(plaintext:id:blindIndex:reserve:appleCode:)`` sealed, or one queued before it by
    /// itself (``sealNotification(_:webhookID:)`` with the same webhook id): one X25519 multiplication gives the box's
    /// key, which opens either kind.
    public func openAppleCode(_ sealed: [UInt8], keyVersion: UInt32, label: String) throws(CryptoError) -> [UInt8] {
        let (master, secretKey) = try masterKeyPair(version: keyVersion)
        let binding = Self.notificationBinding("apple-code-" + label, version: keyVersion)
        guard sealed.count >= Sodium.sealBytes + binding.count,
            let key = SealedBox.key(of: sealed, secretKey: secretKey)
        else { throw CryptoError.ciphertextInvalid }
        let opened = SecretBytes(count: sealed.count - Sodium.sealBytes)
        let valid = opened.withUnsafeMutableBytes { buffer in
            // Beside an escrow first (how codes are sealed now), then on its own (rows queued before that).
            (SealedBox.openBeside(sealed, into: buffer, recipient: master.publicKey, key: key)
                || SealedBox.open(sealed, into: buffer, recipient: master.publicKey, key: key))
                && buffer.prefix(binding.count).elementsEqual(binding)
        }
        guard valid else { throw CryptoError.ciphertextInvalid }
        return opened.withUnsafeBytes { Array($0[binding.count...]) }
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
