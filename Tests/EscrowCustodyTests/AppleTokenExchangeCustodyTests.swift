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

/// The token exchange with Apple's key in a real SoftHSM2 token (`scripts/softhsm.sh`): every client secret the
/// exchanger sends is signed inside the token, and the stand-in Apple verifies it with the `.p8`'s public key.
struct AppleTokenExchangeCustodyTests {
    @Test func anExchangeIsSignedByTheKeyInThePKCS11Token() async throws {
        let fixture = try EscrowFixture()
        let p8 = P256.Signing.PrivateKey()
        let signer = try AppleKeySignerTests.pkcs11()
        try await signer.importKey(p8)
        let secrets = AppleClientSecrets(teamID: "FAKETEAM01", keyID: "FAKEKEY001", signer: signer)
        let apple = StandInApple(teamID: "FAKETEAM01", keyID: "FAKEKEY001", publicKey: p8.publicKey)
        try await apple.start()
        let client = AppleKeyFetcher.makeClient(logger: fixture.logger)
        let clientID = "invalid.example.profile-escrow.app"
        let user = Fake.userIdentifier(1)

        // A native sign-in's capture with its code queued (an app's code: no redirect_uri).
        let code = apple.issueCode(user: user, clientID: clientID)
        let now = fixture.clock.now()
        let state = Hashing.blake2b256(Array("state".utf8))
        try await fixture.store.createSignInAttempt(
            SignInAttempt(
                stateHash: state,
                nonceHash: state,
                bindingHash: state,
                returnName: "",
                createdAt: now,
                expiresAt: now.addingTimeInterval(600)
            )
        )
        let request = SignInCompletionRequest(
            stateHash: state,
            bindingHash: state,
            now: now,
            appleExchange: try fixture.escrow.appleExchange(code: code, clientID: clientID, redirectURI: nil, now: now)
        ) { _ in SignInTicket(ticketHash: state, sealedResult: [1], expiresAt: now.addingTimeInterval(300)) }
        _ = try await fixture.escrow.completeSignIn(
            request,
            profile: try Fake.profile(1),
            in: fixture.store,
            actor: .apple
        )

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
        #expect(sent.secretValid == true, "signed in the token: \(sent.secretProblem ?? "")")
        #expect(sent.form["redirect_uri"] == nil, "an app's code has none")
        let record = try #require(try await fixture.escrow.store.records(.all, after: nil, limit: 1).first)
        let tokens = try await fixture.escrow.appleTokens(for: record, at: fixture.clock.now())
        #expect(tokens == .refreshToken(try #require(apple.refreshTokens.first)))
        try await client.shutdown()
        await apple.stop()
    }
}
