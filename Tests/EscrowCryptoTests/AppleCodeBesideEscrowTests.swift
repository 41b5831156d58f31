import Foundation
import Testing

@testable import EscrowCrypto

/// An authorization code sealed beside the escrow of the profile it came with, under the key of the escrow's key box:
/// no X25519 step of its own, opened with the master secret key alone, like a code sealed on its own.
@Suite("An Apple code sealed beside its escrow")
struct AppleCodeBesideEscrowTests {
    let keyring = Keyring.generate()
    let code = "c" + String(repeating: "0123456789abcdef", count: 4) + ".0.test"
    let label = String(repeating: "ab", count: 32)

    func sealWithCode(_ keyring: Keyring) throws -> (escrow: SealedEscrow, appleCode: (keyVersion: UInt32, sealed: [UInt8])) {
        let (escrow, appleCode) = try keyring.seal(
            plaintext: secret("{\"givenName\":\"Test\"}"),
            id: .random(),
            blindIndex: keyring.blindIndex(userIdentifier: FakeUser.first),
            appleCode: (secret(code), label)
        )
        return (escrow, try #require(appleCode))
    }

    @Test func opensWithTheMasterKeyAloneAndSharesTheKeyBoxsEphemeral() throws {
        let (escrow, sealedCode) = try sealWithCode(keyring)
        #expect(sealedCode.keyVersion == escrow.keyVersion)
        // The key box's ephemeral public key, and no other: the code cost no X25519 step of its own.
        #expect(Array(sealedCode.sealed.prefix(32)) == Array(escrow.sealedKey.prefix(32)))
        // Not the sealed box's nonce: `crypto_box_seal_open` does not open it, so the two boxes share no keystream.
        #expect(cryptoErrorCode { try keyring.openNotification(sealedCode.sealed, keyVersion: 1, webhookID: "apple-code-" + label) } == .ciphertextInvalid)
        let opened = try keyring.openAppleCode(sealedCode.sealed, keyVersion: sealedCode.keyVersion, label: label)
        #expect(String(decoding: opened, as: UTF8.self) == code)
        #expect(string(try keyring.open(escrow)) == "{\"givenName\":\"Test\"}")
    }

    /// A code queued before it was sealed beside its escrow: a sealed box of its own, in the notification format.
    @Test func aCodeSealedOnItsOwnStillOpens() throws {
        let (version, sealed) = try keyring.sealNotification(Array(code.utf8), webhookID: "apple-code-" + label)
        #expect(String(decoding: try keyring.openAppleCode(sealed, keyVersion: version, label: label), as: UTF8.self) == code)
    }

    @Test func anotherLabelAChangedByteOrAnotherKeyringOpenNothing() throws {
        let (_, sealedCode) = try sealWithCode(keyring)
        #expect(cryptoErrorCode { try keyring.openAppleCode(sealedCode.sealed, keyVersion: 1, label: "cd" + label.dropFirst(2)) } == .ciphertextInvalid)
        for position in sealedCode.sealed.indices {
            var changed = sealedCode.sealed
            changed[position] ^= 0x01
            #expect(cryptoErrorCode { try keyring.openAppleCode(changed, keyVersion: 1, label: label) } == .ciphertextInvalid, "byte \(position)")
        }
        #expect(cryptoErrorCode { try Keyring.generate().openAppleCode(sealedCode.sealed, keyVersion: 1, label: label) } == .ciphertextInvalid)
        #expect(cryptoErrorCode { try keyring.openAppleCode(sealedCode.sealed, keyVersion: 2, label: label) } == .unknownKeyVersion)
    }

    /// A capture-only node seals both; the code needs nothing of the escrow, so a rewrap of the escrow leaves it
    /// openable with the version it was sealed to.
    @Test func sealedByAPublicOnlyKeyringAndIndependentOfTheEscrow() throws {
        let (escrow, sealedCode) = try sealWithCode(keyring.publicOnly())
        let rotated = try keyring.rotated(now: Date())
        let rewrapped = try rotated.rewrap(escrow)
        #expect(rewrapped.sealedKey.prefix(32) != escrow.sealedKey.prefix(32))
        let opened = try rotated.openAppleCode(sealedCode.sealed, keyVersion: sealedCode.keyVersion, label: label)
        #expect(String(decoding: opened, as: UTF8.self) == code)
    }
}

extension AppleCodeBesideEscrowTests {
    @Test func withoutACodeTheEscrowAlone() throws {
        let (escrow, appleCode) = try keyring.seal(
            plaintext: secret("{\"givenName\":\"Test\"}"),
            id: .random(),
            blindIndex: keyring.blindIndex(userIdentifier: FakeUser.first),
            appleCode: nil
        )
        #expect(appleCode == nil)
        #expect(string(try keyring.open(escrow)) == "{\"givenName\":\"Test\"}")
    }
}
