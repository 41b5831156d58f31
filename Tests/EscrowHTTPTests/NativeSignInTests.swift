import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
import NIOConcurrencyHelpers
import NIOCore
import ProfileEscrow
import Testing

@testable import EscrowHTTP

/// Sign-in from apps over a real socket: the test plays the app (it starts an attempt, then captures the credential
/// natively or runs Apple's web flow in a "Custom Tab" without the starter's cookie), a stand-in Apple signing tokens
/// with the test keys, and the app's backend redeeming the ticket.
@Suite("Sign-in from apps")
struct NativeSignInTests {
    @Test("an attempt: its secret, state and nonce, the nonce's SHA-256, the authorize URL; stored as hashes only")
    func attempt() async throws {
        let flow = try await NativeFlow()
        try await flow.base.harness.app().test(.live) { client async throws in
            let response = try await flow.startAttempt(client, body: ["return": "app", "appState": "fake-app-state"])
            #expect(response.status == .created)
            #expect(response.headers[.cacheControl] == "no-store")
            let answer = response.json
            let attempt = try #require(answer["attempt"] as? String)
            let nonce = try #require(answer["nonce"] as? String)
            let state = try #require(answer["state"] as? String)
            #expect(attempt.count >= 22 && nonce.count >= 22 && state.count >= 22, "at least 128 bits each")
            #expect(Set([attempt, nonce, state]).count == 3)
            #expect(answer["nonceSHA256"] as? String == Hex.encode(Hashing.sha256(Array(nonce.utf8))))
            let authorize = try #require(answer["authorizeURL"] as? String)
            #expect(authorize.hasPrefix(SignInFlow.authorizeURL + "?"))
            let query = SignInFlow.query(authorize)
            #expect(query["state"] == state && query["nonce"] == nonce)
            #expect(query["client_id"] == SignInFlow.clientID && query["response_mode"] == "form_post")
            let expiresAt = try #require(answer["expiresAt"] as? String)
            #expect(expiresAt.hasSuffix("Z"))
            #expect(response.headers[.setCookie] == nil, "an app's attempt sets no cookie")

            let second = try await flow.startAttempt(client, body: [:]).json
            #expect(second["attempt"] as? String != attempt, "each attempt its own secret")
            #expect(try await flow.startAttempt(client, body: ["return": "elsewhere"]).status == .badRequest)
            let long = String(repeating: "a", count: SignInAttempt.maximumAppStateSize + 1)
            #expect(try await flow.startAttempt(client, body: ["appState": long]).status == .badRequest)
            #expect(try await flow.startAttempt(client, body: ["other": "x"]).status == .badRequest)

            for file in flow.base.harness.fixture.storeFiles() {
                for secret in [attempt, state, nonce, "fake-app-state"] {
                    #expect(!file.bytes.contains(bytes: Array(secret.utf8)), "no secret in clear in \(file.name)")
                }
            }
        }
    }

    @Test(
        "native capture: a ticket; sent again, the same ticket and no second capture; redeemed only with its attempt"
    )
    func capture() async throws {
        let flow = try await NativeFlow()
        try await flow.base.harness.app().test(.live) { client async throws in
            let started = try await flow.start(client, appState: "fake-app-state")
            let code = "c.fake-code-\(UUID().uuidString)"
            var claims = NativeFlow.claims(sub: SignInFlow.userIdentifier(1), nonce: started.nonceSHA256)
            claims.c_hash = NativeFlow.codeHash(code)
            claims.transfer_sub = "000000.faketransfer.0001"
            let token = try await AppleTestKeys.shared.sign(claims)
            let credential: [String: Any] = [
                "attempt": started.attempt, "identityToken": token, "authorizationCode": code,
                "fullName": ["givenName": "Fakegiven1", "familyName": "Fakefamily1"],
                "email": "fakeother1@example.invalid", "user": "000000.notthesub.0001",
            ]
            let first = try await flow.capture(client, credential)
            #expect(first.status == .created)
            let ticket = try #require(first.json["ticket"] as? String)
            let escrowID = try #require(first.json["escrowId"] as? String)
            #expect(first.json["profileRefused"] == nil)
            // Durable before the answer, verified, with the token's sub and email.
            let plaintext = try await flow.base.harness.escrow.replay(userIdentifier: SignInFlow.userIdentifier(1))
            #expect(plaintext.verified)
            #expect(plaintext.profile.fullName?.givenName == "Fakegiven1")
            #expect(plaintext.profile.email == SignInFlow.email(1), "the token's email wins")
            #expect(plaintext.emailVerified == true)
            #expect(plaintext.transferSub == "000000.faketransfer.0001", "sealed with the profile")
            let delivery = String(decoding: plaintext.backendJSON(escrowId: escrowID, attempt: 1), as: UTF8.self)
            #expect(delivery.contains(#""emailVerified":true,"transferSub":"000000.faketransfer.0001","attempt":1}"#))

            let again = try await flow.capture(client, credential)
            #expect(again.status == .ok, "the same request again: answered again")
            #expect(again.json["ticket"] as? String == ticket && again.json["escrowId"] as? String == escrowID)
            #expect(try await flow.base.captures() == 1, "one capture whatever the retries")

            var other = claims
            other.c_hash = nil
            var otherCredential = credential
            otherCredential["identityToken"] = try await AppleTestKeys.shared.sign(other)
            otherCredential["authorizationCode"] = nil
            #expect(try await flow.capture(client, otherCredential).status == .gone, "another token: attempt used")
            var unknown = credential
            unknown["attempt"] = AppleSignInRoutes.secret()
            #expect(try await flow.capture(client, unknown).status == .gone, "an unknown attempt")

            #expect(try await flow.redeem(client, ticket, attempt: nil).status == .gone, "the ticket alone")
            let stranger = try await flow.start(client)
            #expect(try await flow.redeem(client, ticket, attempt: stranger.attempt).status == .gone)
            let redeemed = try await flow.redeem(client, ticket, attempt: started.attempt)
            #expect(redeemed.status == .ok, "with its attempt, once the others were refused")
            let result = redeemed.json
            #expect(result["userIdentifier"] as? String == SignInFlow.userIdentifier(1))
            #expect(result["authorizationCode"] as? String == code)
            #expect(result["emailVerified"] as? Bool == true)
            #expect(result["appState"] as? String == "fake-app-state")
            #expect(result["transferSub"] as? String == "000000.faketransfer.0001")
            #expect(result["escrowId"] as? String == escrowID)
            #expect(result["return"] as? String == "app")
            #expect(try await flow.redeem(client, ticket, attempt: started.attempt).status == .gone, "once")
            #expect(try await flow.capture(client, credential).status == .gone, "redeemed: the retry is over")
            #expect(try await flow.base.captures() == 1)
            let secrets = [started.attempt, started.nonce, started.nonceSHA256, token, code, ticket]
            try flow.base.expectNothingSecretLogged(secrets)
        }
    }

    @Test(
        "refused with one generic 401 and nothing captured: another attempt's nonce, the web audience, a wrong c_hash",
        arguments: ["nonce", "audience", "c_hash"]
    )
    func tokenRefused(_ wrong: String) async throws {
        let flow = try await NativeFlow()
        try await flow.base.harness.app().test(.live) { client async throws in
            let started = try await flow.start(client)
            let other = try await flow.start(client)
            var claims = NativeFlow.claims(sub: SignInFlow.userIdentifier(1), nonce: started.nonceSHA256)
            let code = "c.fake-code"
            claims.c_hash = NativeFlow.codeHash(code)
            switch wrong {
            case "nonce": claims.nonce = other.nonceSHA256
            case "audience": claims.aud = SignInFlow.clientID
            default: claims.c_hash = NativeFlow.codeHash("c.another-code")
            }
            var credential: [String: Any] = [
                "attempt": started.attempt, "identityToken": try await AppleTestKeys.shared.sign(claims),
                "authorizationCode": code, "fullName": ["givenName": "Fakegiven1"],
            ]
            let refused = try await flow.capture(client, credential)
            #expect(refused.status == .unauthorized)
            #expect(refused.json["code"] as? String == "identity_token_invalid")
            #expect(try await flow.base.captures() == 0)
            // The attempt stays live for its own token.
            var good = claims
            good.nonce = started.nonceSHA256
            good.aud = AppleTestKeys.audience
            good.c_hash = NativeFlow.codeHash(code)
            credential["identityToken"] = try await AppleTestKeys.shared.sign(good)
            #expect(try await flow.capture(client, credential).status == .created)
        }
    }

    @Test("an email only the app gave is captured and redeemed as unverified; a returning user captures nothing")
    func appSuppliedEmail() async throws {
        let flow = try await NativeFlow()
        try await flow.base.harness.app().test(.live) { client async throws in
            let started = try await flow.start(client)
            var claims = NativeFlow.claims(sub: SignInFlow.userIdentifier(1), nonce: started.nonceSHA256)
            claims.email = nil
            let answer = try await flow.capture(
                client,
                [
                    "attempt": started.attempt, "identityToken": try await AppleTestKeys.shared.sign(claims),
                    "email": "fakeother1@example.invalid", "fullName": ["givenName": "Fakegiven1"],
                ]
            )
            #expect(answer.status == .created)
            let plaintext = try await flow.base.harness.escrow.replay(userIdentifier: SignInFlow.userIdentifier(1))
            #expect(plaintext.profile.email == "fakeother1@example.invalid")
            #expect(plaintext.emailVerified == false, "never verified")
            let ticket = try #require(answer.json["ticket"] as? String)
            let result = try await flow.redeem(client, ticket, attempt: started.attempt).json
            #expect(result["email"] as? String == "fakeother1@example.invalid")
            #expect(result["emailVerified"] as? Bool == false)

            let returning = try await flow.start(client)
            var returningClaims = NativeFlow.claims(sub: SignInFlow.userIdentifier(2), nonce: returning.nonceSHA256)
            returningClaims.email = nil
            let signedIn = try await flow.capture(
                client,
                [
                    "attempt": returning.attempt,
                    "identityToken": try await AppleTestKeys.shared.sign(returningClaims),
                ]
            )
            #expect(signedIn.status == .created)
            #expect(signedIn.json["escrowId"] is NSNull, "no name, no email: nothing to escrow")
            #expect(try await flow.base.captures() == 1)
        }
    }

    @Test("Apple's callback of an app's attempt, without a cookie: 303 to the app's intent:// return, the ticket bound")
    func customTab() async throws {
        let flow = try await NativeFlow()
        try await flow.base.harness.app().test(.live) { client async throws in
            let started = try await flow.start(client, returnName: "android")
            let form = try await flow.base.form(
                SignInFlow.Started(
                    response: started.response,
                    state: started.state,
                    nonce: started.nonce,
                    cookie: ""
                ),
                user: SignInFlow.userJSON(1),
                claims: SignInFlow.Claims(sub: SignInFlow.userIdentifier(1), nonce: started.nonce)
            )
            let callback = try await flow.base.callback(client, form, cookie: nil)
            #expect(callback.status == .seeOther)
            #expect(callback.headers[.setCookie] == nil)
            let location = try #require(callback.headers[.location])
            #expect(location.hasPrefix("intent://callback?ticket="), "the query before the fragment")
            #expect(location.hasSuffix("#Intent;package=invalid.example.app;scheme=signinwithapple;end"))
            let ticket = try #require(SignInFlow.query(location)["ticket"])
            #expect(try await flow.base.captures() == 1)
            #expect(try await flow.redeem(client, ticket, attempt: nil).status == .gone, "the ticket alone")
            let redeemed = try await flow.redeem(client, ticket, attempt: started.attempt)
            #expect(redeemed.status == .ok)
            #expect(redeemed.json["return"] as? String == "android")
            // A browser's attempt still needs its cookie.
            let browser = try await flow.base.start(client)
            let browserForm = try await flow.base.form(browser, user: nil)
            let refused = try await flow.base.callback(client, browserForm, cookie: nil)
            #expect(refused.headers[.location] == SignInFlow.returnURL + "?error=signin_invalid")
        }
    }

    @Test("with codes exchanged here, a native capture queues its code for the app's bundle ID, no redirect URI")
    func codeExchangedForTheApp() async throws {
        var exchanging = try await NativeFlow()
        exchanging.base.harness.configuration.signIn?.exchangesCodes = true
        let flow = exchanging
        try await flow.base.harness.app().test(.live) { client async throws in
            let started = try await flow.start(client)
            let code = "c.fake-code-\(UUID().uuidString)"
            var claims = NativeFlow.claims(sub: SignInFlow.userIdentifier(1), nonce: started.nonceSHA256)
            claims.c_hash = NativeFlow.codeHash(code)
            let answer = try await flow.capture(
                client,
                [
                    "attempt": started.attempt, "identityToken": try await AppleTestKeys.shared.sign(claims),
                    "authorizationCode": code, "fullName": ["givenName": "Fakegiven1"],
                ]
            )
            #expect(answer.status == .created)
            let escrowID = try #require((answer.json["escrowId"] as? String).flatMap(EscrowID.init(hex:)))
            let exchanges = try await flow.base.harness.store.appleExchanges(escrowID: escrowID)
            #expect(exchanges.map(\.clientID) == [AppleTestKeys.audience], "the token's audience: the app's")
            #expect(exchanges.first?.redirectURI == nil, "a native code has no redirect URI")
            let ticket = try #require(answer.json["ticket"] as? String)
            let redeemed = try await flow.redeem(client, ticket, attempt: started.attempt).json
            #expect(redeemed["authorizationCode"] is NSNull && redeemed["appleTokens"] as? String == "in-escrow")
        }
    }

    @Test("the 503 page's form-action allows each return: a page by its origin, an app's return by its scheme")
    func formAction() {
        let configuration = AppleSignInConfiguration(
            clientID: SignInFlow.clientID,
            callbackURL: SignInFlow.callbackURL,
            returns: [
                "app": SignInFlow.returnURL, "android": NativeFlow.androidReturn,
                "ios": "invalid.example.app:/signed-in",
            ]
        )
        #expect(configuration.returnOrigins == ["https://app.example.invalid", "intent:", "invalid.example.app:"])
    }

    @Test(
        "with the store down nothing is acknowledged (503); the app sends the same credential again and gets a ticket"
    )
    func storeDown() async throws {
        let flow = try await NativeFlow()
        let store = FailingSignInStore(flow.base.harness.store)
        try await flow.base.harness.app(signIns: store).test(.live) { client async throws in
            let started = try await flow.start(client)
            let claims = NativeFlow.claims(sub: SignInFlow.userIdentifier(1), nonce: started.nonceSHA256)
            let credential: [String: Any] = [
                "attempt": started.attempt, "identityToken": try await AppleTestKeys.shared.sign(claims),
                "fullName": ["givenName": "Fakegiven1"],
            ]
            store.failing.withLockedValue { $0 = true }
            #expect(try await flow.capture(client, credential).status == .serviceUnavailable)
            #expect(try await flow.base.captures() == 0)
            store.failing.withLockedValue { $0 = false }
            #expect(try await flow.capture(client, credential).status == .created)
            #expect(try await flow.base.captures() == 1)
        }
    }
}

/// The web sign-in's stand-ins, with a native audience and an Android return registered beside the web's.
struct NativeFlow {
    static let androidReturn = "intent://callback#Intent;package=invalid.example.app;scheme=signinwithapple;end"

    /// An identity token's claims as Apple gives an app: the audience its bundle ID, the nonce the request's.
    static func claims(sub: String, nonce: String) -> SignInFlow.Claims {
        SignInFlow.Claims(aud: AppleTestKeys.audience, sub: sub, nonce: nonce)
    }

    struct Started {
        let response: TestResponse
        let attempt: String
        let state: String
        let nonce: String
        let nonceSHA256: String
    }

    var base: SignInFlow

    init() async throws {
        base = try await SignInFlow()
        base.harness.configuration.signIn?.returns["android"] = Self.androidReturn
    }

    static func codeHash(_ code: String) -> String {
        Base64URL.encode(Array(Hashing.sha256(Array(code.utf8)).prefix(16)))
    }

    func startAttempt(_ client: some TestClientProtocol, body: [String: Any]) async throws -> TestResponse {
        try await client.execute(
            uri: "/v1/apple/attempts",
            method: .post,
            headers: [.contentType: "application/json"],
            body: Fake.body(body)
        )
    }

    func start(
        _ client: some TestClientProtocol,
        returnName: String = "app",
        appState: String? = nil
    ) async throws -> Started {
        var body: [String: Any] = ["return": returnName]
        if let appState { body["appState"] = appState }
        let response = try await startAttempt(client, body: body)
        let json = response.json
        return Started(
            response: response,
            attempt: json["attempt"] as? String ?? "",
            state: json["state"] as? String ?? "",
            nonce: json["nonce"] as? String ?? "",
            nonceSHA256: json["nonceSHA256"] as? String ?? ""
        )
    }

    func capture(_ client: some TestClientProtocol, _ credential: [String: Any]) async throws -> TestResponse {
        try await client.execute(
            uri: "/v1/apple/native/capture",
            method: .post,
            headers: [.contentType: "application/json"],
            body: Fake.body(credential)
        )
    }

    func redeem(_ client: some TestClientProtocol, _ ticket: String, attempt: String?) async throws -> TestResponse {
        var body = ["ticket": ticket]
        if let attempt { body["attempt"] = attempt }
        return try await client.execute(
            uri: "/v1/apple/signin/tickets/redeem",
            method: .post,
            headers: base.harness.headers("signin", json: true),
            body: Fake.body(body)
        )
    }
}
