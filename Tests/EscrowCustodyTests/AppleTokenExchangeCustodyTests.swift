import AsyncHTTPClient
import Crypto
import EscrowCore
import EscrowCrypto
import EscrowCustody
import EscrowHTTP
import EscrowSQLite
import EscrowTestSupport
import Foundation
import ProfileEscrow
import Testing

/// The token exchange with Apple's key in custody, in a real SoftHSM2 token (`scripts/softhsm.sh`) and in a real
/// OpenBao's Transit (`scripts/openbao.sh`, imported by BYOK): every client secret the exchanger sends is signed inside
/// the engine, and the stand-in Apple verifies it with the `.p8`'s public key.
struct AppleTokenExchangeCustodyTests {
    enum Engine: String, CaseIterable, Sendable {
        case pkcs11, transit
    }

    /// A signer whose engine holds `p8`, imported there.
    static func signer(
        _ engine: Engine,
        holding p8: P256.Signing.PrivateKey
    ) async throws -> any AppleClientSecretSigner {
        switch engine {
        case .pkcs11:
            let signer = try AppleKeySignerTests.pkcs11()
            try await signer.importKey(p8)
            return signer
        case .transit:
            let signer = try TransitAppleKeySignerTests.signer().0
            try await signer.importKey(p8)
            return signer
        }
    }

    @Test(arguments: Engine.allCases)
    func anExchangeIsSignedByTheKeyInCustody(_ engine: Engine) async throws {
        let fixture = try EscrowFixture()
        let p8 = P256.Signing.PrivateKey()
        let signer = try await Self.signer(engine, holding: p8)
        let secrets = AppleClientSecrets(teamID: "FAKETEAM01", keyID: "FAKEKEY001", signer: signer)
        let apple = StandInApple(teamID: "FAKETEAM01", keyID: "FAKEKEY001", publicKey: p8.publicKey)
        try await apple.start()
        let client = AppleKeyFetcher.makeClient(logger: fixture.logger)
        let clientID = "invalid.example.profile-escrow.app"

        // A verified capture with an app's code queued (no redirect_uri).
        let code = apple.issueCode(user: Fake.userIdentifier(1), clientID: clientID)
        let exchange = try fixture.escrow.appleExchange(
            code: code,
            clientID: clientID,
            redirectURI: nil,
            now: fixture.clock.now()
        )
        _ = try await fixture.escrow.capture(try Fake.profile(1), verified: true, appleExchange: exchange)

        let exchanger = AppleTokenExchanger(
            AppleTokenExchanger.Configuration(tokenURL: apple.tokenURL),
            store: fixture.store,
            escrow: fixture.escrow,
            verifier: try await AppleVerifier(jwksJSON: apple.jwks, audiences: [clientID]),
            clientSecret: { try await secrets.secret(for: $0).jwt },
            client: client,
            logger: fixture.logger
        )
        #expect(await exchanger.runOnce() == 1)
        let sent = try #require(apple.requests.first)
        #expect(sent.secretValid == true, "signed in \(engine): \(sent.secretProblem ?? "")")
        #expect(sent.form["redirect_uri"] == nil, "an app's code has none")
        let record = try #require(try await fixture.escrow.store.records(.all, after: nil, limit: 1).first)
        let tokens = try await fixture.escrow.appleTokens(for: record, at: fixture.clock.now())
        #expect(tokens == .refreshToken(try #require(apple.refreshTokens.first)))
        try await client.shutdown()
        await apple.stop()
    }
}
