import EscrowCore
import EscrowCrypto
import Testing

@testable import EscrowHTTP

@Suite("Sign-in tickets: their attempt named in them")
struct SignInTicketTextTests {
    let stateHash = AppleSignInRoutes.hash("fake-state")

    @Test("a ticket carries its attempt's state hash, and is found by it with its own hash checked")
    func namesItsAttempt() {
        let ticket = SignInTicketText.random(stateHash: stateHash)
        #expect(ticket.utf8.count == 86, "64 bytes in unpadded base64url")
        let key = SignInTicketText.key(ticket)
        #expect(key.stateHash == stateHash)
        #expect(key.ticketHash == AppleSignInRoutes.hash(ticket))
        #expect(SignInTicketText.random(stateHash: stateHash) != ticket, "256 random bits of its own")
    }

    @Test("a native capture's ticket is the same for the same credential, another for another")
    func nativeTicketDerived() throws {
        let secret = try #require(AppAttemptSecret("fake-attempt-secret"))
        let ticket = secret.ticket(stateHash: stateHash, identityToken: "fake.token.one", authorizationCode: "c-1")
        #expect(
            ticket == secret.ticket(stateHash: stateHash, identityToken: "fake.token.one", authorizationCode: "c-1")
        )
        #expect(
            ticket != secret.ticket(stateHash: stateHash, identityToken: "fake.token.two", authorizationCode: "c-1")
        )
        #expect(ticket != secret.ticket(stateHash: stateHash, identityToken: "fake.token.one", authorizationCode: nil))
        #expect(SignInTicketText.key(ticket).stateHash == stateHash)
    }

    @Test("a ticket of the earlier format (32 bytes) or any other text is looked up by its hash alone")
    func otherTexts() {
        for text in [
            Base64URL.encode(Array(repeating: 7, count: 32)), "unknown-ticket", "", "%%%",
            String(repeating: "A", count: 85),
        ] {
            let key = SignInTicketText.key(text)
            #expect(key.stateHash == nil, "\(text)")
            #expect(key.ticketHash == AppleSignInRoutes.hash(text))
        }
    }
}
