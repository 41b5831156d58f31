import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import ProfileEscrow
import Testing

/// Apple's refresh token is sealed to the escrow's own key pair, beside its profile. An email Apple changed seals the
/// profile again with that pair kept, so the token still opens; a token sealed to a pair the escrow no longer has
/// (resealed by an earlier release) is reported in the delivery instead of holding the escrow back for good.
@Suite("Apple's tokens beside an escrow whose email changed")
struct AppleTokensResealTests {
    /// An escrow captured with a code, its exchange ended with `tokens` sealed into `into` (the escrow itself when nil).
    func escrowWithTokens(
        _ harness: EscrowFixture,
        user number: Int,
        into other: SealedEscrow? = nil
    ) async throws -> EscrowID {
        let now = harness.clock.now()
        let exchange = try harness.escrow.appleExchange(
            code: "fake-code-\(number)",
            clientID: "invalid.example.app",
            redirectURI: nil,
            now: now
        )
        let receipt = try await harness.escrow.capture(
            try Fake.profile(number),
            verified: true,
            emailVerified: true,
            appleExchange: exchange
        )
        let store = try #require(harness.escrow.appleTokenStore)
        let claimed = try #require(try await store.claimAppleExchanges(at: now, limit: 1, lease: 30).first)
        let record = try #require(try await harness.store.record(id: receipt.escrowID))
        let tokens = try harness.keyring.sealAppleTokens(
            SecretBytes(copying: Array("fake-refresh-token-\(number)".utf8)),
            into: other ?? record.sealed
        )
        let ended = try await store.endAppleExchange(
            claimed.key,
            attempts: claimed.attempts,
            outcome: .tokens(sealed: tokens),
            at: now
        )
        #expect(ended)
        return receipt.escrowID
    }

    @Test("the refresh token still opens after the email changed")
    func tokensOpenAfterEmailChange() async throws {
        let harness = try EscrowFixture()
        let id = try await escrowWithTokens(harness, user: 1)
        let update = try await harness.escrow.updateEmail(
            userIdentifier: Fake.userIdentifier(1),
            email: Fake.email(2),
            isPrivateEmail: nil,
            actor: .apple
        )
        #expect(update == .updated)
        let record = try #require(try await harness.store.record(id: id))
        #expect(try await harness.escrow.open(record, actor: .library).profile.email == Fake.email(2))
        let tokens = try await harness.escrow.appleTokens(for: record, at: harness.clock.now())
        #expect(tokens == .refreshToken("fake-refresh-token-1"))
    }

    @Test("a refresh token sealed to another key pair is reported as tokens_unreadable, not held")
    func unreadableTokensAreReported() async throws {
        let harness = try EscrowFixture()
        let elsewhere = try harness.keyring.seal(
            plaintext: SecretBytes(copying: Array("fake".utf8)),
            id: .random(),
            blindIndex: harness.keyring.blindIndex(userIdentifier: Fake.userIdentifier(9))
        )
        let id = try await escrowWithTokens(harness, user: 1, into: elsewhere)
        let record = try #require(try await harness.store.record(id: id))
        let tokens = try await harness.escrow.appleTokens(for: record, at: harness.clock.now())
        #expect(tokens == .error(AppleTokenExchange.tokensUnreadable))
        let logged = harness.loggedText()
        #expect(logged.contains("cannot be opened; delivered without it"))
        #expect(!logged.contains("fake-refresh-token"), "the token is never logged")
    }
}
