import Foundation
import Testing

@testable import EscrowCrypto

/// An escrow's profile sealed again (Apple changed the user's email): its key pair is kept, so that what was sealed
/// to it beside the profile, Apple's tokens, still opens; the boxes are new.
@Suite("Resealing an escrow's profile")
struct ResealTests {
    let keyring = Keyring.generate()

    @Test func theTokensStillOpenAfterAReseal() throws {
        let original = try keyring.sealFake("{\"email\":\"old@example.invalid\"}")
        let tokens = try keyring.sealAppleTokens(secret("fake-refresh-token"), into: original)
        let resealed = try keyring.reseal(plaintext: secret("{\"email\":\"new@example.invalid\"}"), of: original)
        #expect(resealed.id == original.id && resealed.blindIndex == original.blindIndex)
        #expect(resealed.publicKey == original.publicKey, "the escrow's key pair is kept")
        #expect(resealed.sealedProfile != original.sealedProfile && resealed.sealedKey != original.sealedKey)
        #expect(string(try keyring.open(resealed)) == "{\"email\":\"new@example.invalid\"}")
        #expect(string(try keyring.openAppleTokens(tokens, of: resealed)) == "fake-refresh-token")
        // A new key pair (what sealing anew makes) would leave the tokens unopenable.
        let anew = try keyring.seal(plaintext: secret("x"), id: original.id, blindIndex: original.blindIndex)
        #expect(cryptoErrorCode { try keyring.openAppleTokens(tokens, of: anew) } == .ciphertextInvalid)
    }

    @Test func aResealGoesToTheActiveVersion() throws {
        let original = try keyring.sealFake("{\"email\":\"old@example.invalid\"}")
        let tokens = try keyring.sealAppleTokens(secret("fake-refresh-token"), into: original)
        let rotated = try keyring.rotated(now: Date())
        let resealed = try rotated.reseal(plaintext: secret("{\"email\":\"new@example.invalid\"}"), of: original)
        #expect(resealed.keyVersion == rotated.activeVersion && resealed.keyVersion != original.keyVersion)
        #expect(string(try rotated.open(resealed)) == "{\"email\":\"new@example.invalid\"}")
        #expect(string(try rotated.openAppleTokens(tokens, of: resealed)) == "fake-refresh-token")
    }

    @Test func aDamagedRowIsNotResealed() throws {
        var damaged = try keyring.sealFake("{\"email\":\"old@example.invalid\"}")
        damaged.sealedKey[damaged.sealedKey.count - 1] ^= 1
        #expect(cryptoErrorCode { try keyring.reseal(plaintext: secret("x"), of: damaged) } == .ciphertextInvalid)
    }
}
