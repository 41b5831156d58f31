extension Keyring {
    /// The first bytes of a wrapped secret key's associated data: `"PEW1" || keyring id || u32be(version)`.
    static let wrapMagic: [UInt8] = Array("PEW1".utf8)
    /// The size of a keyring id.
    static let idByteCount = 16

    /// True while some secret key is held only wrapped: the keyring was loaded from a custody file and not yet
    /// given to ``unwrapped(by:)``. Such a keyring seals, but opens nothing.
    public var isWrapped: Bool { masterKeys.contains { $0.secretKey == nil && $0.wrappedSecretKey != nil } }

    /// The associated data a version's secret key is wrapped with: a blob moved to another version or another
    /// keyring does not unwrap.
    func associatedData(version: UInt32) -> [UInt8] {
        Self.wrapMagic + (id ?? []) + BigEndian.bytes(version)
    }

    /// The same keyring with every wrapped secret key unwrapped by `custodian` (one engine call per version), each
    /// checked against its public key. Done once at start and at each reload: nothing per escrow.
    public func unwrapped(by custodian: any KeyCustodian) async throws(CryptoError) -> Keyring {
        var keys: [MasterKey] = []
        for key in masterKeys {
            guard key.secretKey == nil, let wrapped = key.wrappedSecretKey else {
                keys.append(key)
                continue
            }
            let secret = try await custodian.unwrap(wrapped, associatedData: associatedData(version: key.version))
            guard secret.count == Sodium.boxSecretKeyBytes,
                KeyringFileParser.secretKey(secret, matches: key.publicKey)
            else {
                throw CryptoError(
                    .wrappedKeyInvalid,
                    "\(custodian.engine): the secret key of version \(key.version) unwrapped, but does not belong to "
                        + "its public key"
                )
            }
            keys.append(key.with(secretKey: secret, wrapped: wrapped))
        }
        return replacing(keys)
    }

    /// This plain keyring put into custody: a new keyring id, and every secret key wrapped by `custodian` (the
    /// secrets stay in memory; the file written from the result holds only the wrapped forms).
    public func wrapped(into custody: KeyCustody, by custodian: any KeyCustodian) async throws(CryptoError) -> Keyring {
        guard !isPublicOnly else {
            throw CryptoError(.keyringRefused, "a public-only keyring holds no secret key to put into custody")
        }
        guard self.custody == nil, !isWrapped else {
            throw CryptoError(.keyringRefused, "the keyring is already in custody; use `keys custody rewrap`")
        }
        try custody.validate()
        let fresh = Keyring(
            masterKeys: masterKeys.map { $0.with(secretKey: $0.secretKey, wrapped: nil) },
            activeVersion: activeVersion,
            indexKey: indexKey,
            rowKey: rowKey,
            isPublicOnly: false,
            custody: custody,
            id: Hashing.randomBytes(count: Self.idByteCount)
        )
        return try await fresh.wrappingNewKeys(by: custodian)
    }

    /// Wraps every secret key that has no wrapped form yet (the version ``rotated(now:)`` added); the others keep
    /// theirs. A plain keyring is returned as it is.
    public func wrappingNewKeys(by custodian: any KeyCustodian) async throws(CryptoError) -> Keyring {
        guard custody != nil else { return self }
        var keys: [MasterKey] = []
        for key in masterKeys {
            guard let secret = key.secretKey, key.wrappedSecretKey == nil else {
                keys.append(key)
                continue
            }
            let wrapped = try await custodian.wrap(secret, associatedData: associatedData(version: key.version))
            keys.append(key.with(secretKey: secret, wrapped: wrapped))
        }
        return replacing(keys)
    }

    /// Every wrapped secret key wrapped again under the engine's newest key version (after a Transit `rotate`).
    public func rewrappedInCustody(by custodian: any KeyCustodian) async throws(CryptoError) -> Keyring {
        guard custody != nil else {
            throw CryptoError(.keyringRefused, "the keyring is not in custody: nothing to rewrap")
        }
        var keys: [MasterKey] = []
        for key in masterKeys {
            guard let wrapped = key.wrappedSecretKey else {
                keys.append(key)
                continue
            }
            let rewrapped = try await custodian.rewrap(wrapped, associatedData: associatedData(version: key.version))
            keys.append(key.with(secretKey: key.secretKey, wrapped: rewrapped))
        }
        return replacing(keys)
    }

    /// This keyring out of custody: a plain keyring whose file holds the secret keys. Needs the secrets unwrapped
    /// (``unwrapped(by:)``).
    public func outOfCustody() throws(CryptoError) -> Keyring {
        guard custody != nil else {
            throw CryptoError(.keyringRefused, "the keyring is not in custody")
        }
        guard !isWrapped else {
            throw CryptoError(.secretKeyUnavailable, "the secret keys are still wrapped: unwrap them first")
        }
        return Keyring(
            masterKeys: masterKeys.map { $0.with(secretKey: $0.secretKey, wrapped: nil) },
            activeVersion: activeVersion,
            indexKey: indexKey,
            rowKey: rowKey,
            isPublicOnly: false
        )
    }

    private func replacing(_ keys: [MasterKey]) -> Keyring {
        Keyring(
            masterKeys: keys,
            activeVersion: activeVersion,
            indexKey: indexKey,
            rowKey: rowKey,
            isPublicOnly: isPublicOnly,
            custody: custody,
            id: id
        )
    }
}

extension Keyring.MasterKey {
    func with(secretKey: SecretBytes?, wrapped: [UInt8]?) -> Keyring.MasterKey {
        Keyring.MasterKey(
            version: version,
            publicKey: publicKey,
            secretKey: secretKey,
            createdAt: createdAt,
            wrappedSecretKey: wrapped
        )
    }
}
