import Foundation
import Testing

@testable import EscrowCrypto

/// The profile box's key stored beside an escrow, sealed under its key box's key, so that an opener makes one X25519
/// multiplication instead of two: what it holds, that opening takes it, and that a row without it, or with a damaged
/// one, opens the long way.
@Suite("The profile box key")
struct ProfileBoxKeyTests {
    let keyring = Keyring.generate()

    func seal(_ text: String) throws -> SealedEscrow { try keyring.sealFake(text) }

    @Test func aSealedEscrowCarriesItsProfileBoxKey() throws {
        let sealed = try seal("{\"givenName\":\"Test\"}")
        #expect(sealed.profileBoxKey.count == 24 + 16 + 32)
        let (secretKey, keyBoxKey) = try keyring.openKeyBoxAndKey(sealed, SealedBox.defaultX25519)
        let stored = try #require(Keyring.openProfileBoxKey(sealed, under: keyBoxKey))
        // The key that `crypto_box_seal_open` with the escrow's secret key computes for the profile box.
        let computed = try #require(SealedBox.key(of: sealed.sealedProfile, secretKey: secretKey))
        #expect(stored == computed)
        // Under another escrow's key box it opens nothing.
        let other = try seal("other")
        let otherKey = try keyring.openKeyBoxAndKey(other, SealedBox.defaultX25519).keyBoxKey
        #expect(Keyring.openProfileBoxKey(sealed, under: otherKey) == nil)
    }

    /// A row whose key box holds a wrong secret key (made with the master public key and the row key, as a row-key
    /// holder could) but a profile box key that opens: only the shortcut can open it, so opening takes the shortcut.
    @Test func openingTakesTheShortcut() throws {
        let sealed = try seal("only the shortcut opens this")
        let master = try #require(keyring.masterKey(version: sealed.keyVersion))
        let profileBoxKey = try #require(
            Keyring.openProfileBoxKey(sealed, under: keyring.openKeyBoxAndKey(sealed, SealedBox.defaultX25519).keyBoxKey)
        )
        let keyBox = SecretBytes(count: Keyring.bindingBytes + 32)
        keyBox.withUnsafeMutableBytes { buffer in
            var writer = ByteWriter(buffer)
            writer.append(Magic.key)
            writer.append(sealed.id.bytes)
            writer.append(sealed.blindIndex.bytes)
            writer.appendBigEndian(sealed.keyVersion)
            writer.append(Array(repeating: 0x42, count: 32))
        }
        let ephemeral = try #require(SealedBox.ephemeral(to: master.publicKey, recipientSecretKey: nil))
        var forged = sealed
        forged.sealedKey = keyBox.withUnsafeBytes { SealedBox.seal($0, to: master.publicKey, using: ephemeral) }
        forged.mac = keyring.rowMAC(forged)
        forged.profileBoxKey = Keyring.sealProfileBoxKey(
            profileBoxKey,
            under: ephemeral.key,
            id: sealed.id,
            blindIndex: sealed.blindIndex,
            version: sealed.keyVersion
        )
        #expect(string(try keyring.open(forged)) == "only the shortcut opens this")
        // Without it, the wrong secret key opens nothing.
        forged.profileBoxKey = []
        #expect(cryptoErrorCode { try keyring.open(forged) } == .ciphertextInvalid)
    }

    @Test func aMissingOrDamagedProfileBoxKeyOpensTheLongWay() throws {
        let sealed = try seal("the long way")
        var missing = sealed
        missing.profileBoxKey = []
        #expect(keyring.verify(missing), "outside the row MAC")
        #expect(string(try keyring.open(missing)) == "the long way")
        for position in sealed.profileBoxKey.indices {
            var damaged = sealed
            damaged.profileBoxKey[position] ^= 0x01
            #expect(string(try keyring.open(damaged)) == "the long way", "byte \(position)")
        }
        var truncated = sealed
        truncated.profileBoxKey.removeLast()
        #expect(string(try keyring.open(truncated)) == "the long way")
        var borrowed = sealed  // another escrow's, for the same user
        borrowed.profileBoxKey = try seal("another").profileBoxKey
        #expect(string(try keyring.open(borrowed)) == "the long way")
    }

    /// Rewrap seals the profile box key again under the new key box, and gives one to a row sealed without it.
    @Test func rewrapKeepsOrAddsTheProfileBoxKey() throws {
        let sealed = try seal("rewrapped")
        var before = sealed
        before.profileBoxKey = []
        let rotated = try keyring.rotated(now: Date())
        for row in [sealed, before] {
            let rewrapped = try rotated.rewrap(row)
            #expect(rewrapped.keyVersion == 2)
            #expect(rewrapped.profileBoxKey.count == 72)
            let (secretKey, keyBoxKey) = try rotated.openKeyBoxAndKey(rewrapped, SealedBox.defaultX25519)
            #expect(
                Keyring.openProfileBoxKey(rewrapped, under: keyBoxKey)
                    == SealedBox.key(of: rewrapped.sealedProfile, secretKey: secretKey)
            )
            #expect(string(try rotated.open(rewrapped)) == "rewrapped")
        }
    }
}
