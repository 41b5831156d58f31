import CSodium
import Foundation
import Testing

@testable import EscrowCrypto

/// `SealedBox` builds libsodium's sealed box with BoringSSL's X25519: each step is checked against libsodium's own.
/// (A debug build, this suite's, seals with libsodium by default: every call here names BoringSSL.)
@Suite("Sealed boxes against libsodium")
struct SealedBoxTests {
    init() { Sodium.ensureInitialized() }

    /// Secret keys to derive from: random ones, and the edges a clamp or a reduction could get wrong.
    static func secretKeys() -> [SecretBytes] {
        let edges: [[UInt8]] = [
            [UInt8](repeating: 0, count: 32),
            [UInt8](repeating: 0xFF, count: 32),
            [1] + [UInt8](repeating: 0, count: 31),
            [UInt8](repeating: 0, count: 31) + [0x80],
            [UInt8](repeating: 0x7F, count: 32),
        ]
        return edges.map { SecretBytes(copying: $0) } + (0..<500).map { _ in SecretBytes.random(count: 32) }
    }

    func libsodiumPublicKey(_ secretKey: SecretBytes) -> [UInt8] {
        var publicKey = [UInt8](repeating: 0, count: 32)
        secretKey.withUnsafeBytes { secret in
            _ = crypto_scalarmult_base(&publicKey, secret.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        return publicKey
    }

    @Test func publicKeysAreLibsodiumsScalarMultiplicationOfTheBasePoint() {
        for secretKey in Self.secretKeys() {
            #expect(SealedBox.publicKey(of: secretKey, .boringSSL) == libsodiumPublicKey(secretKey))
        }
        let (publicKey, secretKey) = SealedBox.keyPair(.boringSSL)
        #expect(publicKey == libsodiumPublicKey(secretKey))
        #expect(secretKey.count == 32)
    }

    @Test func sharedKeysAreLibsodiumsBeforenm() {
        // Any 32 bytes are an X25519 public key: u-coordinates of p (≡ 0, of small order: both refuse it) and
        // p + 9 (≡ 9, the base point), and a set top bit (ignored).
        let edges: [[UInt8]] = [
            [0xED] + [UInt8](repeating: 0xFF, count: 30) + [0x7F],
            [0xF6] + [UInt8](repeating: 0xFF, count: 30) + [0x7F],
            [UInt8](repeating: 0xFF, count: 32),
        ]
        let peers = Self.secretKeys().prefix(100).map { SealedBox.publicKey(of: $0) } + edges
        var refusedByBoth = 0
        for (secretKey, peer) in zip(Self.secretKeys().suffix(peers.count), peers) {
            var expected = [UInt8](repeating: 0, count: 32)
            let status = secretKey.withUnsafeBytes { secret in
                crypto_box_beforenm(&expected, peer, secret.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
            let shared = SealedBox.sharedKey(secretKey: secretKey, recipient: peer)
            if status == 0 {
                #expect(shared == SecretBytes(copying: expected))
            } else {
                #expect(shared == nil)
                refusedByBoth += 1
            }
        }
        #expect(refusedByBoth == 1)
    }

    /// A capture seals the profile to a key pair it has just made, so it holds both secrets of the box's shared
    /// secret: that secret is then one multiplication of the base point by their product, with either library's.
    @Test(arguments: SealedBox.X25519.allCases)
    func aSharedKeyFromTwoHeldSecretsIsLibsodiumsBeforenm(x25519: SealedBox.X25519) {
        let secretKeys = Self.secretKeys()
        for (ephemeral, recipient) in zip(secretKeys, secretKeys.reversed() + secretKeys.prefix(3)) {
            var expected = [UInt8](repeating: 0, count: 32)
            let status = ephemeral.withUnsafeBytes { secret in
                crypto_box_beforenm(
                    &expected,
                    libsodiumPublicKey(recipient),
                    secret.baseAddress!.assumingMemoryBound(to: UInt8.self)
                )
            }
            #expect(status == 0)
            let shared = SealedBox.sharedKey(ephemeralSecretKey: ephemeral, recipientSecretKey: recipient, x25519)
            #expect(shared == SecretBytes(copying: expected))
        }
    }

    /// Two secrets whose product has no scalar that X25519's clamp leaves as it is (found by search; about one pair
    /// in 2^126 is such): the shortcut says so, and the box's key comes from the usual multiplication, still libsodium's.
    @Test func withoutAScalarForTheProductTheKeyIsMultipliedTheUsualWay() throws {
        let ephemeral = SecretBytes(
            copying: bytes(hex: "9b8b847f850d4473da203a29b95a0f094e278c36a065dd2cb08d270703ae4505")
        )
        let recipient = SecretBytes(
            copying: bytes(hex: "206fd1852ccc5f76420449e052645da6b07cb238ff6e46d4465c7d1b52178055")
        )
        let recipientPublicKey = libsodiumPublicKey(recipient)
        var expected = [UInt8](repeating: 0, count: 32)
        _ = ephemeral.withUnsafeBytes { secret in
            crypto_box_beforenm(&expected, recipientPublicKey, secret.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        for x25519 in SealedBox.X25519.allCases {
            #expect(SealedBox.sharedKey(ephemeralSecretKey: ephemeral, recipientSecretKey: recipient, x25519) == nil)
        }
        let key = SealedBox.sealingKey(
            ephemeralSecretKey: ephemeral,
            recipient: recipientPublicKey,
            recipientSecretKey: recipient
        )
        #expect(key == SecretBytes(copying: expected))
    }

    @Test(arguments: [0, 1, 16, 63, 64, 120, 1000, 16 * 1024], [false, true])
    func libsodiumOpensWhatItSeals(count: Int, holdingTheRecipientsSecret: Bool) throws {
        let (publicKey, secretKey) = SealedBox.keyPair(.boringSSL)
        let message = SecretBytes.random(count: count)
        let ephemeral = try #require(
            SealedBox.ephemeral(to: publicKey, recipientSecretKey: holdingTheRecipientsSecret ? secretKey : nil)
        )
        let sealed = message.withUnsafeBytes { SealedBox.seal($0, to: publicKey, using: ephemeral) }
        #expect(sealed.count == count + crypto_box_sealbytes())

        func open(_ box: [UInt8], with secretKey: SecretBytes, publicKey: [UInt8]) -> [UInt8]? {
            var opened = [UInt8](repeating: 0, count: box.count - crypto_box_sealbytes())
            let status = secretKey.withUnsafeBytes { secret in
                crypto_box_seal_open(
                    &opened,
                    box,
                    UInt64(box.count),
                    publicKey,
                    secret.baseAddress!.assumingMemoryBound(to: UInt8.self)
                )
            }
            return status == 0 ? opened : nil
        }
        let opened = try #require(open(sealed, with: secretKey, publicKey: publicKey))
        #expect(SecretBytes(copying: opened) == message)

        // The nonce binds the recipient's key, and the tag every byte: a flipped bit or another key opens nothing.
        var tampered = sealed
        tampered[tampered.count / 2] ^= 0x01
        #expect(open(tampered, with: secretKey, publicKey: publicKey) == nil)
        let (otherPublicKey, otherSecretKey) = SealedBox.keyPair(.boringSSL)
        #expect(open(sealed, with: otherSecretKey, publicKey: otherPublicKey) == nil)
        #expect(open(sealed, with: secretKey, publicKey: otherPublicKey) == nil)
    }

    /// Opening with BoringSSL's multiplication opens what libsodium sealed, and refuses what `crypto_box_seal_open`
    /// refuses: a changed byte, another recipient, a short box, an ephemeral key of small order.
    @Test(arguments: [0, 1, 16, 63, 64, 120, 1000, 16 * 1024])
    func openingIsLibsodiumsSealOpen(count: Int) throws {
        let (publicKey, secretKey) = SealedBox.keyPair(.libsodium)
        let message = SecretBytes.random(count: count)
        var sealed = [UInt8](repeating: 0, count: count + crypto_box_sealbytes())
        let status = message.withUnsafeBytes { bytes in
            crypto_box_seal(&sealed, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(count), publicKey)
        }
        try #require(status == 0)

        func open(
            _ box: [UInt8],
            recipient: [UInt8] = publicKey,
            secretKey: SecretBytes = secretKey,
            _ x25519: SealedBox.X25519
        ) -> SecretBytes? {
            let opened = SecretBytes(count: max(box.count - crypto_box_sealbytes(), 0))
            let ok = opened.withUnsafeMutableBytes { output in
                SealedBox.open(box, into: output, recipient: recipient, secretKey: secretKey, x25519)
            }
            return ok ? opened : nil
        }
        let (otherPublicKey, otherSecretKey) = SealedBox.keyPair(.libsodium)
        var tampered = sealed
        tampered[tampered.count - 1] ^= 0x80
        var smallOrder = sealed
        smallOrder.replaceSubrange(0..<32, with: [UInt8](repeating: 0, count: 32))
        for x25519 in SealedBox.X25519.allCases {
            #expect(open(sealed, x25519) == message)
            #expect(open(tampered, x25519) == nil)
            #expect(open(smallOrder, x25519) == nil)
            #expect(open(sealed, recipient: otherPublicKey, secretKey: otherSecretKey, x25519) == nil)
            #expect(open(sealed, secretKey: otherSecretKey, x25519) == nil)
            #expect(open(Array(sealed.prefix(crypto_box_sealbytes() - 1)), x25519) == nil)
        }
    }

    @Test func everySealHasItsOwnEphemeralKey() throws {
        let (publicKey, _) = SealedBox.keyPair(.boringSSL)
        let message = SecretBytes.random(count: 64)
        let first = try #require(message.withUnsafeBytes { SealedBox.seal($0, to: publicKey, .boringSSL) })
        let second = try #require(message.withUnsafeBytes { SealedBox.seal($0, to: publicKey, .boringSSL) })
        #expect(first.prefix(32) != second.prefix(32))
        #expect(first != second)
    }

    /// A recipient of small order makes an all-zero shared secret, which libsodium refuses: so does `SealedBox`,
    /// and a keyring whose master public key is one fails to seal with a clear error.
    @Test func aRecipientOfSmallOrderIsRefusedAsLibsodiumRefusesIt() throws {
        let smallOrder: [[UInt8]] = [
            [UInt8](repeating: 0, count: 32),
            [1] + [UInt8](repeating: 0, count: 31),
        ]
        let message = SecretBytes.random(count: 64)
        for recipient in smallOrder {
            for x25519 in SealedBox.X25519.allCases {
                #expect(message.withUnsafeBytes { SealedBox.seal($0, to: recipient, x25519) } == nil)
                #expect(throws: CryptoError.self) { try Keyring.sealBox(message, to: recipient, x25519) }
            }
            var sealed = [UInt8](repeating: 0, count: 64 + crypto_box_sealbytes())
            let status = message.withUnsafeBytes { bytes in
                crypto_box_seal(&sealed, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), 64, recipient)
            }
            #expect(status != 0)
        }

        // A keyring whose master public key is of small order, or not 32 bytes, refuses to seal an escrow (with either
        // library, with a reserve of keys or without), naming the problem, and never crashes on it.
        let reserve = SealingKeyReserve(capacity: 2, idlePriority: false, .libsodium)
        reserve.start()
        defer { reserve.stop() }
        for masterPublicKey in smallOrder + [[UInt8](repeating: 9, count: 31)] {
            let keyring = Keyring(
                masterKeys: [
                    Keyring.MasterKey(version: 1, publicKey: masterPublicKey, secretKey: nil, createdAt: Date())
                ],
                activeVersion: 1,
                indexKey: SecretBytes.random(count: 32),
                rowKey: SecretBytes.random(count: 32),
                isPublicOnly: true
            )
            let index = keyring.blindIndex(userIdentifier: "000000.smallorder.invalid")
            for x25519 in SealedBox.X25519.allCases {
                for reserved in [nil, reserve] {
                    let error = #expect(throws: CryptoError.self) {
                        try keyring.seal(
                            plaintext: message,
                            id: .random(),
                            blindIndex: index,
                            x25519: x25519,
                            reserve: reserved
                        )
                    }
                    #expect(error?.code == .keyringMalformed)
                }
            }
        }
    }

    /// A whole escrow sealed by the keyring with either library's X25519 opens with the keyring with either library's,
    /// its MAC verified, its sizes the same.
    @Test(arguments: SealedBox.X25519.allCases)
    func anEscrowSealedWithEitherLibraryOpens(x25519: SealedBox.X25519) throws {
        let keyring = Keyring.generate()
        let plaintext = SecretBytes(copying: Array(#"{"givenName":"Testy","email":"t@example.invalid"}"#.utf8))
        let index = keyring.blindIndex(userIdentifier: "000000.sealedbox.invalid")
        let sealed = try keyring.seal(plaintext: plaintext, id: .random(), blindIndex: index, x25519: x25519)
        #expect(keyring.verify(sealed))
        #expect(sealed.publicKey.count == 32 && sealed.sealedKey.count == 56 + 32 + 48)
        #expect(sealed.sealedProfile.count == 128 + 48)
        for opening in SealedBox.X25519.allCases {
            #expect(try keyring.open(sealed, x25519: opening) == plaintext)
        }
    }
}
