import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import ProfileEscrow
import Testing

@testable import EscrowHTTP

/// The web sign-in's edge as an attacker meets it: login CSRF through a ticket, a used state posted again to clear a
/// victim's cookie, an id_token paired with another code, an email Apple did not sign.
@Suite("Web sign-in: the edge under attack")
struct SignInEdgeTests {
    @Test("appState given at start comes back at redeem, sealed in the store; over 256 bytes it is refused")
    func appStateRoundTrip() async throws {
        let flow = try await SignInFlow()
        let appState = "session-hash-" + String(repeating: "a", count: 200)
        try await flow.harness.app().test(.live) { client async throws in
            let start = try await flow.start(client, appState: appState)
            #expect(start.response.status == .found)
            let callback = try await flow.callback(
                client,
                try await flow.form(start, user: SignInFlow.userJSON(1)),
                cookie: start.cookie
            )
            let ticket = try #require(SignInFlow.query(callback.headers[.location] ?? "")["ticket"])
            let result = try await flow.redeem(client, ticket).json
            #expect(result["appState"] as? String == appState)
            for file in flow.harness.fixture.storeFiles() {
                #expect(!file.bytes.contains(bytes: Array("session-hash-".utf8)), "sealed in \(file.name)")
            }

            let none = try await flow.start(client)
            let plain = try await flow.callback(client, try await flow.form(none, user: nil), cookie: none.cookie)
            let plainTicket = try #require(SignInFlow.query(plain.headers[.location] ?? "")["ticket"])
            #expect(try await flow.redeem(client, plainTicket).json["appState"] is NSNull, "none given: null")

            let long = try await client.execute(
                uri: "/v1/apple/signin?return=app&appState=" + String(repeating: "b", count: 257),
                method: .get
            )
            #expect(long.status == .badRequest)
            #expect(long.headers[.setCookie] == nil && long.headers[.location] == nil)
        }
    }

    @Test("a used state posted again cross-site clears that attempt's cookie only, and the victim still signs in")
    func usedStateLeavesOtherCookies() async throws {
        let flow = try await SignInFlow()
        try await flow.harness.app().test(.live) { client async throws in
            // The attacker completes an attempt of their own.
            let attacker = try await flow.start(client)
            let attackerForm = try await flow.form(attacker, user: nil)
            let done = try await flow.callback(client, attackerForm, cookie: attacker.cookie)
            #expect(done.headers[.location]?.contains("ticket=") == true)
            // The victim has a live attempt; the attacker makes the victim's browser post the used form again.
            let victim = try await flow.start(client)
            #expect(victim.cookie.split(separator: "=").first != attacker.cookie.split(separator: "=").first)
            var headers: HTTPFields = [
                .contentType: "application/x-www-form-urlencoded", .cookie: victim.cookie, .origin: "null",
            ]
            headers[.cookie] = victim.cookie
            let replayed = try await client.execute(
                uri: "/v1/apple/signin/callback",
                method: .post,
                headers: headers,
                body: ByteBuffer(
                    string: attackerForm.map { "\($0.key)=\(SignInForm.encode($0.value))" }.joined(separator: "&")
                )
            )
            #expect(replayed.headers[.location] == SignInFlow.returnURL + "?error=signin_expired")
            let cleared = try #require(replayed.headers[.setCookie])
            #expect(cleared.hasPrefix(AppleSignInRoutes.cookieName(state: attacker.state) + "=;"), "its own only")
            #expect(!cleared.hasPrefix(String(victim.cookie.split(separator: "=")[0]) + "="))
            // The victim's own callback still completes.
            let mine = try await flow.callback(
                client,
                try await flow.form(victim, user: SignInFlow.userJSON(2)),
                cookie: victim.cookie
            )
            #expect(mine.headers[.location]?.hasPrefix(SignInFlow.returnURL + "?ticket=") == true)
        }
    }

    @Test("an id_token whose c_hash is not its code's is refused; the matching one signs in")
    func codeHash() async throws {
        let flow = try await SignInFlow()
        try await flow.harness.app().test(.live) { client async throws in
            let start = try await flow.start(client)
            var claims = SignInFlow.Claims(sub: SignInFlow.userIdentifier(1), nonce: start.nonce)
            claims.c_hash = Base64URL.encode(Array(Hashing.sha256(Array("c.another-users-code".utf8)).prefix(16)))
            var form = try await flow.form(start, user: SignInFlow.userJSON(1), claims: claims)
            let refused = try await flow.callback(client, form, cookie: start.cookie)
            #expect(refused.headers[.location] == SignInFlow.returnURL + "?error=signin_invalid")
            #expect(try await flow.captures() == 0)

            let again = try await flow.start(client)
            claims.nonce = again.nonce
            let code = "c.fake-code-matching"
            claims.c_hash = Base64URL.encode(Array(Hashing.sha256(Array(code.utf8)).prefix(16)))
            form = try await flow.form(again, user: SignInFlow.userJSON(1), claims: claims)
            form["code"] = code
            let accepted = try await flow.callback(client, form, cookie: again.cookie)
            #expect(accepted.headers[.location]?.hasPrefix(SignInFlow.returnURL + "?ticket=") == true)
            #expect(try await flow.captures() == 1)
        }
    }

    @Test("an email only the browser's user field gave is escrowed and redeemed as unverified")
    func unsignedEmail() async throws {
        let flow = try await SignInFlow()
        try await flow.harness.app().test(.live) { client async throws in
            let start = try await flow.start(client)
            var claims = SignInFlow.Claims(sub: SignInFlow.userIdentifier(1), nonce: start.nonce)
            claims.email = nil
            claims.email_verified = nil
            let form = try await flow.form(start, user: SignInFlow.userJSON(1), claims: claims)
            let callback = try await flow.callback(client, form, cookie: start.cookie)
            let ticket = try #require(SignInFlow.query(callback.headers[.location] ?? "")["ticket"])
            let result = try await flow.redeem(client, ticket).json
            #expect(result["email"] as? String == "fakeother1@example.invalid")
            #expect(result["emailVerified"] as? Bool == false)
            let held = try await flow.harness.escrow.replay(userIdentifier: SignInFlow.userIdentifier(1))
            #expect(held.emailVerified == false)
            let body = String(decoding: held.backendJSON(escrowId: "x", attempt: 1), as: UTF8.self)
            #expect(body.contains("\"emailVerified\":false"))

            // With the token's email: verified, and the token's email wins.
            let signed = try await flow.start(client)
            let signedForm = try await flow.form(signed, user: SignInFlow.userJSON(2))
            _ = try await flow.callback(client, signedForm, cookie: signed.cookie)
            let verified = try await flow.harness.escrow.replay(userIdentifier: SignInFlow.userIdentifier(1))
            #expect(verified.profile.email == SignInFlow.email(1) && verified.emailVerified == true)
        }
    }
}
