internal import CSodium

extension Keyring {
    /// Seals the body of a forwarded Apple notification to the active master key version, for the notification
    /// outbox: `crypto_box_seal` of `"PEN1" || u32be(version) || u32be(len(webhookID)) || webhookID || body` to the
    /// version's public key. Works on a public-only keyring; only a keyring with that version's secret key opens it.
    public func sealNotification(
        _ body: [UInt8],
        webhookID: String
    ) throws(CryptoError) -> (keyVersion: UInt32, sealed: [UInt8]) {
        Sodium.ensureInitialized()
        guard let master = masterKey(version: activeVersion) else {
            throw CryptoError(.unknownKeyVersion, "the active master key version is not in the keyring")
        }
        let plaintext = SecretBytes(copying: Self.notificationBinding(webhookID, version: activeVersion) + body)
        return (activeVersion, try Self.sealBox(plaintext, to: master.publicKey))
    }

    /// Opens what ``sealNotification(_:webhookID:)`` sealed, checking that it was sealed for `webhookID` under
    /// `keyVersion`. ``CryptoError/Code/unknownKeyVersion`` when the keyring no longer has the version,
    /// ``CryptoError/Code/secretKeyUnavailable`` without its secret key, ``CryptoError/Code/ciphertextInvalid`` for
    /// anything else.
    public func openNotification(
        _ sealed: [UInt8],
        keyVersion: UInt32,
        webhookID: String
    ) throws(CryptoError) -> [UInt8] {
        let (master, secretKey) = try masterKeyPair(version: keyVersion)
        let binding = Self.notificationBinding(webhookID, version: keyVersion)
        guard sealed.count >= Sodium.sealBytes + binding.count else { throw CryptoError.ciphertextInvalid }
        var plaintext = [UInt8](repeating: 0, count: sealed.count - Sodium.sealBytes)
        let opened = secretKey.withUnsafeBytes { secret in
            crypto_box_seal_open(
                &plaintext,
                sealed,
                UInt64(sealed.count),
                master.publicKey,
                secret.baseAddress!.assumingMemoryBound(to: UInt8.self)
            ) == 0
        }
        guard opened, plaintext.starts(with: binding) else {
            sodium_memzero(&plaintext, plaintext.count)
            throw CryptoError.ciphertextInvalid
        }
        return Array(plaintext[binding.count...])
    }

    /// The master key of `version` and its secret key, for opening what was sealed to it:
    /// ``CryptoError/Code/unknownKeyVersion`` when the keyring no longer has the version,
    /// ``CryptoError/Code/secretKeyUnavailable`` without its secret key.
    func masterKeyPair(version: UInt32) throws(CryptoError) -> (MasterKey, SecretBytes) {
        Sodium.ensureInitialized()
        guard let master = masterKey(version: version) else {
            throw CryptoError(.unknownKeyVersion, "master key version \(version) is not in this keyring")
        }
        guard let secretKey = master.secretKey else {
            throw CryptoError(.secretKeyUnavailable, "this keyring has no secret key for master key version \(version)")
        }
        return (master, secretKey)
    }

    static func notificationBinding(_ webhookID: String, version: UInt32) -> [UInt8] {
        let id = Array(webhookID.utf8)
        return Magic.notification + BigEndian.bytes(version) + BigEndian.bytes(UInt32(clamping: id.count)) + id
    }
}
