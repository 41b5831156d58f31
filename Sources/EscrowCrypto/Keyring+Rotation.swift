public import Foundation

extension Keyring {
    /// A keyring with a new master key pair, version `max + 1`, which becomes the active version. Older versions
    /// stay (so existing escrows still open) until ``retiring(version:)``.
    ///
    /// Throws ``CryptoError/Code/keyringRefused`` for a public-only keyring (a capture-only node cannot hold the
    /// new secret key) and when the highest version is already 4294967295.
    public func rotated(now: Date) throws(CryptoError) -> Keyring {
        guard !isPublicOnly else {
            throw CryptoError(.keyringRefused, "a public-only keyring cannot be rotated: rotate the full keyring")
        }
        let highest = masterKeys.map(\.version).max() ?? 0
        guard highest < UInt32.max else {
            throw CryptoError(.keyringRefused, "the keyring already holds the highest version, \(UInt32.max)")
        }
        let nextVersion = highest + 1
        return Keyring(
            masterKeys: masterKeys + [MasterKey.generate(version: nextVersion, now: now)],
            activeVersion: nextVersion,
            indexKey: indexKey,
            rowKey: rowKey,
            isPublicOnly: false,
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
