public import Foundation

extension Keyring {
    /// A keyring with a new master key pair, version `max + 1`, which becomes the active version. Older versions
    /// stay (so existing escrows still open) until ``retiring(version:)``. The same as ``staged(now:)`` then
    /// ``promoting(version:)``: a version staged before (and never made active) is the one made active.
    ///
    /// Throws ``CryptoError/Code/keyringRefused`` for a public-only keyring (a capture-only node cannot hold the
    /// new secret key) and when the highest version is already 4294967295.
    public func rotated(now: Date) throws(CryptoError) -> Keyring {
        let staged = try staged(now: now)
        return try staged.promoting(version: staged.stagedVersion!)
    }

    /// The version above the active one that holds a secret key (in memory or wrapped): added by ``staged(now:)``
    /// and not yet made active. Nil when there is none.
    public var stagedVersion: UInt32? {
        masterKeys.last { $0.version > activeVersion && ($0.secretKey != nil || $0.wrappedSecretKey != nil) }?.version
    }

    /// The first step of a rotation: a keyring with a new master key pair, version `max + 1`, that is **not** active
    /// yet (nothing is sealed to it); this keyring itself when it already has one (``stagedVersion``: a rotation
    /// that stopped after this step). Written to the keyring file and known durable before ``promoting(version:)``
    /// makes it active, so no node ever seals to a version whose secret key a power cut could take away.
    public func staged(now: Date) throws(CryptoError) -> Keyring {
        guard !isPublicOnly else {
            throw CryptoError(.keyringRefused, "a public-only keyring cannot be rotated: rotate the full keyring")
        }
        if stagedVersion != nil { return self }
        let highest = masterKeys.map(\.version).max() ?? 0
        guard highest < UInt32.max else {
            throw CryptoError(.keyringRefused, "the keyring already holds the highest version, \(UInt32.max)")
        }
        return Keyring(
            masterKeys: masterKeys + [MasterKey.generate(version: highest + 1, now: now)],
            activeVersion: activeVersion,
            indexKey: indexKey,
            rowKey: rowKey,
            isPublicOnly: false,
            custody: custody,
            id: id
        )
    }

    /// The same keyring with `version` (which holds a secret key, in memory or wrapped) as the active version.
    public func promoting(version: UInt32) throws(CryptoError) -> Keyring {
        guard let key = masterKey(version: version) else {
            throw CryptoError(.unknownKeyVersion, "master key version \(version) is not in this keyring")
        }
        guard key.secretKey != nil || key.wrappedSecretKey != nil else {
            throw CryptoError(.secretKeyUnavailable, "master key version \(version) has no secret key: not made active")
        }
        return Keyring(
            masterKeys: masterKeys,
            activeVersion: version,
            indexKey: indexKey,
            rowKey: rowKey,
            isPublicOnly: isPublicOnly,
            custody: custody,
            id: id
        )
    }

    /// A keyring where `version`'s secret key is gone (its public key stays, so the version remains known). The
    /// dropped key is zeroed once no keyring refers to it any more.
    ///
    /// Throws ``CryptoError/Code/keyVersionActive`` for the active version and
    /// ``CryptoError/Code/unknownKeyVersion`` for a version not in the keyring. Checking that no escrow still uses
    /// the version is the caller's job: it knows the store (`Escrow` throws `EscrowError` `key_in_use`).
    public func retiring(version: UInt32) throws(CryptoError) -> Keyring {
        guard masterKey(version: version) != nil else {
            throw CryptoError(.unknownKeyVersion, "master key version \(version) is not in this keyring")
        }
        guard version != activeVersion else {
            throw CryptoError(.keyVersionActive, "master key version \(version) is active; rotate before retiring it")
        }
        return Keyring(
            masterKeys: masterKeys.map {
                $0.version == version
                    ? MasterKey(version: $0.version, publicKey: $0.publicKey, secretKey: nil, createdAt: $0.createdAt)
                    : $0
            },
            activeVersion: activeVersion,
            indexKey: indexKey,
            rowKey: rowKey,
            isPublicOnly: isPublicOnly,
            custody: custody,
            id: id
        )
    }
}
