internal import CSodium

extension Keyring {
    /// Bytes before the payload in both sealed plaintexts: magic (4), id (16), blind index (32), version (4).
    static let bindingBytes = 4 + EscrowID.byteCount + BlindIndex.byteCount + 4
    /// `sodium_pad` block size of the profile plaintext.
    static let paddingBlock = 64

    /// Seals `plaintext` (opaque profile bytes) as a new escrow to the active master key version.
    ///
    /// A fresh X25519 key pair is made for the escrow; the profile plaintext is bound to `id` and `blindIndex`,
    /// padded to a multiple of 64 bytes and sealed to the escrow's public key; the escrow's secret key is sealed to
    /// the active master public key; the row MAC covers everything. Works on a public-only keyring.
    ///
    /// `reserve`: keys made ahead of time (``SealingKeyReserve``), taken when it has some for the active master key;
    /// otherwise the keys are made here. The result is the same either way.
    public func seal(
        plaintext: SecretBytes,
        id: EscrowID,
        blindIndex: BlindIndex,
        reserve: SealingKeyReserve? = nil
    ) throws(CryptoError) -> SealedEscrow {
        try seal(
            plaintext: plaintext,
            id: id,
            blindIndex: blindIndex,
            x25519: SealedBox.defaultX25519,
            reserve: reserve
        )
    }

    /// ``seal(plaintext:id:blindIndex:reserve:)`` with the library of its X25519 steps given (tests seal with both).
    func seal(
        plaintext: SecretBytes,
        id: EscrowID,
        blindIndex: BlindIndex,
        x25519: SealedBox.X25519,
        reserve: SealingKeyReserve? = nil
    ) throws(CryptoError) -> SealedEscrow {
        try sealKeepingKeys(plaintext: plaintext, id: id, blindIndex: blindIndex, x25519: x25519, reserve: reserve)
            .sealed
    }

    /// A new profile for the escrow `sealed` (an email Apple changed), sealed to the active master key version with
    /// the escrow's own key pair kept: what was sealed to its public key beside the profile (Apple's tokens,
    /// ``sealAppleTokens(_:into:)``) still opens. Checks `sealed` as ``open(_:)`` does (it needs the master secret
    /// key of its version); the profile and key boxes are new, with fresh ephemeral keys.
    public func reseal(plaintext: SecretBytes, of sealed: SealedEscrow) throws(CryptoError) -> SealedEscrow {
        let secretKey = try openKeyBox(sealed)
        return try sealKeepingKeys(
            plaintext: plaintext,
            id: sealed.id,
            blindIndex: sealed.blindIndex,
            x25519: SealedBox.defaultX25519,
            reserve: nil,
            keyPair: (sealed.publicKey, secretKey)
        ).sealed
    }

    /// ``seal(plaintext:id:blindIndex:x25519:reserve:)``, and the keys it sealed with: the key box's ephemeral key
    /// and key seal what goes beside the escrow to the same master key at no X25519 cost (``SealedBox/sealBeside``).
    /// `keyPair`: the escrow's own, kept (``reseal(plaintext:of:)``), instead of a new one.
    func sealKeepingKeys(
        plaintext: SecretBytes,
        id: EscrowID,
        blindIndex: BlindIndex,
        x25519: SealedBox.X25519,
        reserve: SealingKeyReserve?,
        keyPair: (publicKey: [UInt8], secretKey: SecretBytes)? = nil
    ) throws(CryptoError) -> (sealed: SealedEscrow, keys: SealingKeys, masterPublicKey: [UInt8]) {
        Sodium.ensureInitialized()
        guard let master = masterKey(version: activeVersion) else {
            throw CryptoError(.unknownKeyVersion, "the active master key version is not in the keyring")
        }
        try Self.requireRecipientLength(master.publicKey)
        // All of the escrow's X25519 work: made ahead when the reserve has some, here otherwise.
        let made: SealingKeys?
        if let keyPair {
            made = SealingKeys.make(masterPublicKey: master.publicKey, x25519, keyPair: keyPair)
        } else {
            made = reserve?.take(for: master.publicKey) ?? SealingKeys.make(masterPublicKey: master.publicKey, x25519)
        }
        guard let keys = made else { throw Self.smallOrderRecipient }
        let publicKey = keys.publicKey

        let unpaddedCount = Self.bindingBytes + plaintext.count
        let paddedCount = (unpaddedCount / Self.paddingBlock + 1) * Self.paddingBlock
        let profileBox = SecretBytes(count: paddedCount)
        let padded = profileBox.withUnsafeMutableBytes { buffer -> Bool in
            var writer = ByteWriter(buffer)
            writer.append(Magic.profile)
            Self.appendBinding(to: &writer, id: id, blindIndex: blindIndex, version: activeVersion)
            plaintext.withUnsafeBytes { writer.append($0) }
            var resultCount = 0
            let status = sodium_pad(
                &resultCount,
                buffer.baseAddress!.assumingMemoryBound(to: UInt8.self),
                unpaddedCount,
                Self.paddingBlock,
                paddedCount
            )
            return status == 0 && resultCount == paddedCount
        }
        precondition(padded, "sodium_pad failed for a correctly sized buffer")
        let sealedProfile = profileBox.withUnsafeBytes { SealedBox.seal($0, to: publicKey, using: keys.profileBox) }

        let keyBox = SecretBytes(count: Self.bindingBytes + Sodium.boxSecretKeyBytes)
        keyBox.withUnsafeMutableBytes { buffer in
            var writer = ByteWriter(buffer)
            writer.append(Magic.key)
            Self.appendBinding(to: &writer, id: id, blindIndex: blindIndex, version: activeVersion)
            keys.secretKey.withUnsafeBytes { writer.append($0) }
        }
        let sealedKey = keyBox.withUnsafeBytes { SealedBox.seal($0, to: master.publicKey, using: keys.keyBox) }

        var sealed = SealedEscrow(
            id: id,
            blindIndex: blindIndex,
            keyVersion: activeVersion,
            publicKey: publicKey,
            sealedProfile: sealedProfile,
            sealedKey: sealedKey,
            mac: []
        )
        sealed.mac = rowMAC(sealed)
        sealed.profileBoxKey = Self.sealProfileBoxKey(
            keys.profileBox.key,
            under: keys.keyBox.key,
            id: id,
            blindIndex: blindIndex,
            version: activeVersion
        )
        return (sealed, keys, master.publicKey)
    }

    /// Checks the row MAC in constant time (`crypto_auth_verify`). Needs no secret key.
    public func verify(_ sealed: SealedEscrow) -> Bool {
        Sodium.ensureInitialized()
        guard sealed.mac.count == Sodium.authBytes else { return false }
        let input = Self.macInput(sealed)
        return rowKey.withUnsafeBytes { key in
            crypto_auth_verify(
                sealed.mac,
                input,
                UInt64(input.count),
                key.baseAddress!.assumingMemoryBound(to: UInt8.self)
            ) == 0
        }
    }

    /// Opens an escrow and returns the profile bytes that were sealed.
    ///
    /// Checks, in order: the row MAC; that the key version is known (``CryptoError/Code/unknownKeyVersion``) and
    /// its secret key present (``CryptoError/Code/secretKeyUnavailable``); the key box and its bindings; the
    /// profile box, its bindings and its padding. Any MAC, decryption, binding or padding failure is
    /// ``CryptoError/Code/ciphertextInvalid`` with one generic message.
    public func open(_ sealed: SealedEscrow) throws(CryptoError) -> SecretBytes {
        try open(sealed, x25519: SealedBox.defaultX25519)
    }

    /// ``open(_:)`` with the library of its X25519 steps given (tests open with both).
    func open(_ sealed: SealedEscrow, x25519: SealedBox.X25519) throws(CryptoError) -> SecretBytes {
        let (escrowSecretKey, keyBoxKey) = try openKeyBoxAndKey(sealed, x25519)
        let boxCount = sealed.sealedProfile.count
        guard sealed.publicKey.count == Sodium.boxPublicKeyBytes,
            boxCount >= Sodium.sealBytes + Self.paddingBlock,
            (boxCount - Sodium.sealBytes) % Self.paddingBlock == 0
        else { throw CryptoError.ciphertextInvalid }

        let profileBox = SecretBytes(count: boxCount - Sodium.sealBytes)
        let opened = profileBox.withUnsafeMutableBytes { buffer in
            // The shortcut (Keyring+ProfileBoxKey.swift) when the row has one that opens the box; else the long way.
            if let profileBoxKey = Self.openProfileBoxKey(sealed, under: keyBoxKey),
                SealedBox.open(sealed.sealedProfile, into: buffer, recipient: sealed.publicKey, key: profileBoxKey)
            {
                return true
            }
            return SealedBox.open(
                sealed.sealedProfile,
                into: buffer,
                recipient: sealed.publicKey,
                secretKey: escrowSecretKey,
                x25519
            )
        }
        // The profile box keeps the version it was sealed under: rewrap re-seals only the key box, and versions only
        // grow, so the profile's version is at most the row's.
        guard opened, Self.bindingMatches(profileBox, magic: Magic.profile, sealed, exactVersion: false) else {
            throw CryptoError.ciphertextInvalid
        }
        let unpaddedCount = profileBox.withUnsafeMutableBytes { buffer -> Int? in
            var count = 0
            let status = sodium_unpad(
                &count,
                buffer.baseAddress!.assumingMemoryBound(to: UInt8.self),
                buffer.count,
                Self.paddingBlock
            )
            return status == 0 ? count : nil
        }
        guard let unpaddedCount, unpaddedCount >= Self.bindingBytes else { throw CryptoError.ciphertextInvalid }
        return profileBox.withUnsafeBytes { buffer in
            SecretBytes(copying: UnsafeRawBufferPointer(rebasing: buffer[Self.bindingBytes..<unpaddedCount]))
        }
    }

    /// Re-seals the escrow's secret key to the active master key version and recomputes the MAC; the profile box
    /// is untouched. A row already at the active version is returned as is (after its MAC is checked).
    public func rewrap(_ sealed: SealedEscrow) throws(CryptoError) -> SealedEscrow {
        guard verify(sealed) else { throw CryptoError.ciphertextInvalid }
        guard sealed.keyVersion != activeVersion else { return sealed }
        guard let master = masterKey(version: activeVersion) else {
            throw CryptoError(.unknownKeyVersion, "the active master key version is not in the keyring")
        }
        try Self.requireRecipientLength(master.publicKey)
        let (escrowSecretKey, keyBoxKey) = try openKeyBoxAndKey(sealed, SealedBox.defaultX25519)
        let keyBox = SecretBytes(count: Self.bindingBytes + Sodium.boxSecretKeyBytes)
        keyBox.withUnsafeMutableBytes { buffer in
            var writer = ByteWriter(buffer)
            writer.append(Magic.key)
            Self.appendBinding(to: &writer, id: sealed.id, blindIndex: sealed.blindIndex, version: activeVersion)
            escrowSecretKey.withUnsafeBytes { writer.append($0) }
        }
        guard let ephemeral = SealedBox.ephemeral(to: master.publicKey, recipientSecretKey: nil, SealedBox.defaultX25519)
        else {
            throw Self.smallOrderRecipient
        }
        var rewrapped = sealed
        rewrapped.keyVersion = activeVersion
        rewrapped.sealedKey = keyBox.withUnsafeBytes { SealedBox.seal($0, to: master.publicKey, using: ephemeral) }
        rewrapped.mac = rowMAC(rewrapped)
        // The profile box's key, sealed again under the new key box's: from the old shortcut, or (a row sealed
        // before it existed) computed from the escrow's secret key, so that a rewrapped row opens the short way.
        if let profileBoxKey = Self.openProfileBoxKey(sealed, under: keyBoxKey)
            ?? SealedBox.key(of: sealed.sealedProfile, secretKey: escrowSecretKey)
        {
            rewrapped.profileBoxKey = Self.sealProfileBoxKey(
                profileBoxKey,
                under: ephemeral.key,
                id: sealed.id,
                blindIndex: sealed.blindIndex,
                version: activeVersion
            )
        } else {
            rewrapped.profileBoxKey = []
        }
        return rewrapped
    }

    /// The row MAC of `sealed` (its `mac` field is ignored). Internal: tests use it to play an attacker who holds
    /// the row key.
    func rowMAC(_ sealed: SealedEscrow) -> [UInt8] {
        let input = Self.macInput(sealed)
        var mac = [UInt8](repeating: 0, count: Sodium.authBytes)
        rowKey.withUnsafeBytes { key in
            _ = crypto_auth(&mac, input, UInt64(input.count), key.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        return mac
    }

    /// Verifies the MAC, then opens the key box with the master key of the row's version and checks its bindings.
    /// Returns the escrow's secret key.
    func openKeyBox(
        _ sealed: SealedEscrow,
        _ x25519: SealedBox.X25519 = SealedBox.defaultX25519
    ) throws(CryptoError) -> SecretBytes {
        try openKeyBoxAndKey(sealed, x25519).secretKey
    }

    /// ``openKeyBox(_:_:)``, and the key the key box was sealed with (its one multiplication), which opens the
    /// profile box's key (Keyring+ProfileBoxKey.swift).
    func openKeyBoxAndKey(
        _ sealed: SealedEscrow,
        _ x25519: SealedBox.X25519
    ) throws(CryptoError) -> (secretKey: SecretBytes, keyBoxKey: SecretBytes) {
        Sodium.ensureInitialized()
        guard verify(sealed) else { throw CryptoError.ciphertextInvalid }
        guard let master = masterKey(version: sealed.keyVersion) else {
            throw CryptoError(.unknownKeyVersion, "master key version \(sealed.keyVersion) is not in this keyring")
        }
        guard let masterSecretKey = master.secretKey else {
            throw CryptoError(
                .secretKeyUnavailable,
                "this keyring has no secret key for master key version \(sealed.keyVersion) "
                    + "(public-only keyring or retired version)"
            )
        }
        let keyBoxCount = Self.bindingBytes + Sodium.boxSecretKeyBytes
        guard sealed.sealedKey.count == keyBoxCount + Sodium.sealBytes else { throw CryptoError.ciphertextInvalid }
        let keyBox = SecretBytes(count: keyBoxCount)
        guard let keyBoxKey = SealedBox.key(of: sealed.sealedKey, secretKey: masterSecretKey, x25519) else {
            throw CryptoError.ciphertextInvalid
        }
        let opened = keyBox.withUnsafeMutableBytes { buffer in
            SealedBox.open(sealed.sealedKey, into: buffer, recipient: master.publicKey, key: keyBoxKey)
        }
        guard opened, Self.bindingMatches(keyBox, magic: Magic.key, sealed, exactVersion: true) else {
            throw CryptoError.ciphertextInvalid
        }
        let secretKey = keyBox.withUnsafeBytes { buffer in
            SecretBytes(copying: UnsafeRawBufferPointer(rebasing: buffer[Self.bindingBytes...]))
        }
        return (secretKey, keyBoxKey)
    }

    private static func appendBinding(
        to writer: inout ByteWriter,
        id: EscrowID,
        blindIndex: BlindIndex,
        version: UInt32
    ) {
        writer.append(id.bytes)
        writer.append(blindIndex.bytes)
        writer.appendBigEndian(version)
    }

    /// Whether an opened plaintext starts with `magic`, the row's id and blind index, and a key version that is the
    /// row's (`exactVersion`) or, for the profile box, between 1 and the row's (rewrap leaves the profile untouched).
    private static func bindingMatches(
        _ plaintext: SecretBytes,
        magic: [UInt8],
        _ sealed: SealedEscrow,
        exactVersion: Bool
    ) -> Bool {
        var expected: [UInt8] = []
        expected.reserveCapacity(bindingBytes - 4)
        expected += magic
        expected += sealed.id.bytes
        expected += sealed.blindIndex.bytes
        return plaintext.withUnsafeBytes { buffer in
            guard buffer.count >= bindingBytes, sodium_memcmp(buffer.baseAddress!, expected, expected.count) == 0 else {
                return false
            }
            let version = BigEndian.uint32(buffer[expected.count..<bindingBytes])
            return exactVersion ? version == sealed.keyVersion : version >= 1 && version <= sealed.keyVersion
        }
    }

    /// `"PEM1" || id || blindIndex || u32be(keyVersion) || publicKey || u32be(len) || sealedProfile
    /// || u32be(len) || sealedKey`.
    static func macInput(_ sealed: SealedEscrow) -> [UInt8] {
        var input: [UInt8] = []
        input.reserveCapacity(
            bindingBytes + sealed.publicKey.count + 8 + sealed.sealedProfile.count + sealed.sealedKey.count
        )
        input += Magic.mac
        input += sealed.id.bytes
        input += sealed.blindIndex.bytes
        input += BigEndian.bytes(sealed.keyVersion)
        input += sealed.publicKey
        input += BigEndian.bytes(UInt32(clamping: sealed.sealedProfile.count))
        input += sealed.sealedProfile
        input += BigEndian.bytes(UInt32(clamping: sealed.sealedKey.count))
        input += sealed.sealedKey
        return input
    }

    /// A sealed box (the format of `crypto_box_seal`) of a secret plaintext to `publicKey`.
    static func sealBox(
        _ plaintext: SecretBytes,
        to publicKey: [UInt8],
        _ x25519: SealedBox.X25519 = SealedBox.defaultX25519
    ) throws(CryptoError) -> [UInt8] {
        try requireRecipientLength(publicKey)
        guard let sealed = plaintext.withUnsafeBytes({ SealedBox.seal($0, to: publicKey, x25519) }) else {
            throw smallOrderRecipient
        }
        return sealed
    }

    static func requireRecipientLength(_ publicKey: [UInt8]) throws(CryptoError) {
        guard publicKey.count == Sodium.boxPublicKeyBytes else {
            throw CryptoError(.keyringMalformed, "a public key has the wrong length")
        }
    }

    static let smallOrderRecipient = CryptoError(
        .keyringMalformed,
        "a public key in the keyring is unusable (a point of small order)"
    )
}
