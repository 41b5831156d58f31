import Crypto
import EscrowCrypto
import EscrowCustody
import EscrowTestSupport
import Foundation
import Testing

/// Apple's key imported into a real OpenBao Transit (`scripts/openbao.sh`) by BYOK and signing there.
struct TransitAppleKeySignerTests {
    /// A signer for a fresh Transit key name, with the root token: importing needs `transit/wrapping_key` and
    /// `transit/keys/<name>/import`, which the scripts' scoped token (encrypt and decrypt only) lacks.
    static func signer() throws -> (TransitAppleKeySigner, token: String) {
        let address = try CustodyEngine.variable("PROFILE_ESCROW_TEST_BAO_ADDR")
        let token = try CustodyEngine.variable("PROFILE_ESCROW_TEST_BAO_ROOT_TOKEN")
        let transit = KeyCustody.Transit(address: address, key: "apple-" + Hex.encode(Hashing.randomBytes(count: 4)))
        return (TransitAppleKeySigner(transit, environment: ["PROFILE_ESCROW_TRANSIT_TOKEN": token]), token)
    }

    @Test func aP8ImportedIntoTransitSignsThere() async throws {
        let (signer, token) = try Self.signer()
        let key = P256.Signing.PrivateKey()
        do {
            try await signer.importKey(key)
        } catch {
            Issue.record("import: \(error.message)")
            return
        }
        let message = Array("eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJGQUtFVEVBTTAxIn0".utf8)
        let signature = try await signer.sign(message)
        #expect(AppleP8Key.verifies(signature, for: message, with: key.publicKey))
        #expect(!AppleP8Key.verifies(signature, for: message, with: P256.Signing.PrivateKey().publicKey))

        // A client secret minted through Transit verifies with the .p8's public key.
        let secrets = AppleClientSecrets(teamID: "FAKETEAM01", keyID: "FAKEKEY001", signer: signer)
        let jwt = try await secrets.secret(for: "com.example.fake.web").jwt
        let parts = jwt.split(separator: ".")
        #expect(
            AppleP8Key.verifies(
                try #require(Base64URL.decode(Array(parts[2].utf8))),
                for: Array((parts[0] + "." + parts[1]).utf8),
                with: key.publicKey
            )
        )

        // Importing again under the same name is refused by Transit; the message holds no token.
        let again = await #expect(throws: EscrowCrypto.CryptoError.self) {
            try await signer.importKey(P256.Signing.PrivateKey())
        }
        #expect(again?.message.contains(token) == false)
        #expect(AppleP8Key.verifies(try await signer.sign(message), for: message, with: key.publicKey))
    }

    /// RFC 5649's own examples (section 6): 20 and 7 octets under a 192-bit key.
    @Test func aesKeyWrapWithPaddingMatchesRFC5649() throws {
        let kek = SymmetricKey(data: try #require(Hex.decode("5840df6e29b02af1ab493b705bf16ea1ae8338f4dcc176a8")))
        let twenty = try #require(Hex.decode("c37b7e6492584340bed12207808941155068f738"))
        #expect(
            Hex.encode(try AESKeyWrapWithPadding.wrap(twenty, using: kek))
                == "138bdeaa9b8fa7fc61f97742e72248ee5ae6ae5360d1ae6a5f54f373fa543b6a"
        )
        let seven = try #require(Hex.decode("466f7250617369"))
        #expect(Hex.encode(try AESKeyWrapWithPadding.wrap(seven, using: kek)) == "afbeb0f07dfbf5419200f2ccb50bb24f")
    }

    @Test func aMissingTransitKeyIsRefused() async throws {
        let (signer, _) = try Self.signer()
        let error = await #expect(throws: EscrowCrypto.CryptoError.self) { try await signer.sign([1, 2, 3]) }
        #expect(error?.code == .custodyRefused)
    }
}
