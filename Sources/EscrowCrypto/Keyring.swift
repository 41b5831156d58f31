internal import CSodium
public import Foundation

/// The master keyring: versioned X25519 key pairs (exactly one active), the blind-index key and the row key.
///
/// A `Keyring` is immutable; ``rotated(now:)``, ``retiring(version:)`` and ``publicOnly()`` return new ones.
/// A public-only keyring (``isPublicOnly``) holds no secret key: it can seal, verify row MACs and compute blind
/// indexes and content tags, but ``open(_:)`` fails with ``CryptoError/Code/secretKeyUnavailable``.
/// File format, sealing layout and MAC input: `docs/FORMAT.md`.
public final class Keyring: Sendable {
    /// One master key version.
    struct MasterKey: Sendable {
        let version: UInt32
        let publicKey: [UInt8]
        let secretKey: SecretBytes?
        let createdAt: Date
        /// The secret key wrapped by the keyring's custody engine (``Keyring/custody``), as the file stores it; nil
        /// in a plain keyring and for a retired version.
        var wrappedSecretKey: [UInt8]? = nil
    }

    /// The master keys, by ascending version.
    let masterKeys: [MasterKey]
    /// The version new escrows are sealed to.
    public let activeVersion: UInt32
    /// The BLAKE2b key of the blind index (32 bytes).
    let indexKey: SecretBytes
    /// The `crypto_auth` key of the row MAC and the content tag (32 bytes).
    let rowKey: SecretBytes
    /// True for a keyring that holds no secret key at all (a capture-only node).
    public let isPublicOnly: Bool
    /// Where the master secret keys are kept wrapped; nil for a plain keyring (secrets in the file).
    public let custody: KeyCustody?
    /// The keyring's random id (16 bytes), bound into every wrapped secret key; nil for a plain keyring.
    let id: [UInt8]?

    init(
        masterKeys: [MasterKey],
        activeVersion: UInt32,
        indexKey: SecretBytes,
        rowKey: SecretBytes,
        isPublicOnly: Bool,
        custody: KeyCustody? = nil,
        id: [UInt8]? = nil
    ) {
        precondition(masterKeys.contains { $0.version == activeVersion }, "the active version must be in the keyring")
        self.masterKeys = masterKeys
        self.activeVersion = activeVersion
        self.indexKey = indexKey
        self.rowKey = rowKey
        self.isPublicOnly = isPublicOnly
        self.custody = custody
        self.id = id
    }

    /// A fresh keyring: version 1 active, a new index key and a new row key.
    public static func generate(now: Date = Date()) -> Keyring {
        Sodium.ensureInitialized()
        return Keyring(
            masterKeys: [MasterKey.generate(version: 1, now: now)],
            activeVersion: 1,
            indexKey: SecretBytes.random(count: 32),
            rowKey: SecretBytes.random(count: 32),
            isPublicOnly: false
        )
    }

    /// Public facts about every version, ascending.
    public var keys: [KeyInfo] {
        masterKeys.map {
            KeyInfo(
                version: $0.version,
                publicKey: $0.publicKey,
                hasSecretKey: $0.secretKey != nil || $0.wrappedSecretKey != nil,
                createdAt: $0.createdAt
            )
        }
    }

    /// The versions whose secret key this keyring holds in memory: what it can open now. A version held only
    /// wrapped (a keyring in custody not yet unwrapped, ``isWrapped``) is not among them, though ``keys`` counts it as
    /// held.
    public var openableVersions: Set<UInt32> { Set(masterKeys.filter { $0.secretKey != nil }.map(\.version)) }

    /// Whether `other` has the same index and row keys (compared in constant time): the same blind indexes and
    /// row MACs, so it may replace this keyring in a running process (a reload after a rotation or a retirement).
    /// A keyring with other keys would make every stored escrow unreachable.
    public func sharesIndexAndRowKeys(with other: Keyring) -> Bool {
        (indexKey == other.indexKey) && (rowKey == other.rowKey)
    }

    /// The same keyring without any master secret key, for a capture-only node (`keys export-public`).
    /// The index key and the row key stay: the node must compute blind indexes and MACs.
    public func publicOnly() -> Keyring {
        Keyring(
            masterKeys: masterKeys.map {
                MasterKey(version: $0.version, publicKey: $0.publicKey, secretKey: nil, createdAt: $0.createdAt)
            },
            activeVersion: activeVersion,
            indexKey: indexKey,
            rowKey: rowKey,
            isPublicOnly: true
        )
    }

    /// The blind index of a user: `crypto_generichash` (BLAKE2b-256) of the identifier's UTF-8, keyed with the
    /// index key.
    public func blindIndex(userIdentifier: String) -> BlindIndex {
        Sodium.ensureInitialized()
        var output = [UInt8](repeating: 0, count: BlindIndex.byteCount)
        Hashing.withContiguousBytes(Array(userIdentifier.utf8)) { input in
            indexKey.withUnsafeBytes { key in
                _ = crypto_generichash(
                    &output,
                    output.count,
                    input.baseAddress,
                    UInt64(input.count),
                    key.baseAddress,
                    key.count
                )
            }
        }
        return BlindIndex(bytes: output)!
    }

    /// A 32-byte MAC of `message` for the HTTP service's own short-lived stamps (a web sign-in's resubmission page):
    /// `crypto_generichash` keyed with the row key over `"PES1" || message`. The row key is in public-only keyrings
    /// too, so every node of a deployment makes and checks the same stamps, across restarts.
    public func serviceStamp(_ message: [UInt8]) -> [UInt8] {
        Sodium.ensureInitialized()
        let input = Array("PES1".utf8) + message
        return Hashing.withContiguousBytes(input) { rowKeyedHash($0) }
    }

    /// `crypto_generichash` (32 bytes) of `message`, keyed with the row key.
    private func rowKeyedHash(_ message: UnsafeRawBufferPointer) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        rowKey.withUnsafeBytes { key in
            _ = crypto_generichash(
                &output,
                output.count,
                message.baseAddress,
                UInt64(message.count),
                key.baseAddress,
                key.count
            )
        }
        return output
    }

    /// A 32-byte tag that is equal for equal content of the same user: `crypto_generichash` keyed with the row key
    /// over `"PEC1" || blindIndex || plaintext`. Lets a capture of the same content be recognised without opening.
    public func contentTag(blindIndex: BlindIndex, plaintext: SecretBytes) -> [UInt8] {
        Sodium.ensureInitialized()
        let input = SecretBytes(count: 4 + BlindIndex.byteCount + plaintext.count)
        input.withUnsafeMutableBytes { buffer in
            var writer = ByteWriter(buffer)
            writer.append(Magic.content)
            writer.append(blindIndex.bytes)
            plaintext.withUnsafeBytes { writer.append($0) }
        }
        return input.withUnsafeBytes { rowKeyedHash($0) }
    }

    func masterKey(version: UInt32) -> MasterKey? {
        masterKeys.first { $0.version == version }
    }
}

extension Keyring: CustomStringConvertible {
    /// Versions and mode only, never a key.
    public var description: String {
        "Keyring(active: \(activeVersion), versions: \(masterKeys.map(\.version)), publicOnly: \(isPublicOnly)"
            + (custody.map { ", custody: \($0.kind)" } ?? "") + ")"
    }
}

extension Keyring.MasterKey {
    /// A fresh `crypto_box_keypair`; `createdAt` is truncated to the second, as the file stores it.
    static func generate(version: UInt32, now: Date) -> Keyring.MasterKey {
        Sodium.ensureInitialized()
        var publicKey = [UInt8](repeating: 0, count: Sodium.boxPublicKeyBytes)
        let secretKey = SecretBytes(count: Sodium.boxSecretKeyBytes)
        secretKey.withUnsafeMutableBytes { secret in
            _ = crypto_box_keypair(&publicKey, secret.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        let seconds = now.timeIntervalSince1970.rounded(.down)
        return Keyring.MasterKey(
            version: version,
            publicKey: publicKey,
            secretKey: secretKey,
            createdAt: Date(timeIntervalSince1970: seconds)
        )
    }
}
