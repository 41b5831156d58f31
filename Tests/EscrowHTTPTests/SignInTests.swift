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

/// Web sign-in over a real socket: the service is the redirect URI, a stand-in Apple signs the id_token with a test
/// key whose JWKS the service reads from a file, and the test plays the browser (cookie jar, form_post) and the app's
/// backend (the ticket's redeem).
@Suite("Web sign-in")
struct SignInTests {
    @Test("start, callback, redeem: the profile escrowed before the redirect, the ticket redeemed once")
    func happyPath() async throws {
        let flow = try await SignInFlow()
        try await flow.harness.app().test(.live) { client async throws in
            let start = try await flow.start(client)
            #expect(start.response.status == .found)
            let location = try #require(start.response.headers[.location])
            #expect(location.hasPrefix(SignInFlow.authorizeURL + "?"))
            let query = SignInFlow.query(location)
            #expect(query["client_id"] == SignInFlow.clientID)
            #expect(query["redirect_uri"] == SignInFlow.callbackURL)
            #expect(query["response_mode"] == "form_post")
            #expect(query["response_type"] == "code id_token")
            #expect(query["scope"] == "name email")
            #expect((query["state"]?.count ?? 0) >= 43 && (query["nonce"]?.count ?? 0) >= 43)
            let cookie = try #require(start.response.headers[.setCookie])
            #expect(cookie.hasPrefix(AppleSignInRoutes.cookieName(state: query["state"] ?? "") + "="), "one a sign-in")
            for attribute in ["__Host-pe-signin-", "HttpOnly", "Secure", "SameSite=None", "Path=/", "Max-Age=2400"] {
                #expect(cookie.contains(attribute), "binding cookie has \(attribute)")
            }
            #expect(start.response.headers[.cacheControl] == "no-store")

            let form = try await flow.form(start, user: SignInFlow.userJSON(1))
            let callback = try await flow.callback(client, form, cookie: start.cookie)
            #expect(callback.status == .seeOther)
            #expect(callback.headers[.cacheControl] == "no-store")
            #expect(callback.headers[.referrerPolicy] == "no-referrer")
            #expect(callback.headers[.setCookie]?.contains("Max-Age=0") == true, "the binding cookie is cleared")
            let redirect = try #require(callback.headers[.location])
            #expect(redirect.hasPrefix(SignInFlow.returnURL + "?ticket="))
            for secret in [form["code"]!, form["id_token"]!, form["state"]!] {
                #expect(!redirect.contains(secret), "no code, id_token or state in the URL")
            }
            // Durable before the answer: the escrow is there as soon as the redirect is.
            let plaintext = try await flow.harness.escrow.replay(userIdentifier: SignInFlow.userIdentifier(1))
            #expect(plaintext.verified)
            #expect(plaintext.profile.fullName?.givenName == "Fakegiven1")
            #expect(plaintext.profile.fullName?.familyName == "Fakefamily1")
            #expect(plaintext.profile.email == SignInFlow.email(1), "the id_token's email")

            let ticket = try #require(SignInFlow.query(redirect)["ticket"])
            let redeemed = try await flow.redeem(client, ticket)
            #expect(redeemed.status == .ok)
            let result = redeemed.json
            #expect(result["userIdentifier"] as? String == SignInFlow.userIdentifier(1))
            #expect(result["authorizationCode"] as? String == form["code"])
            #expect(result["email"] as? String == SignInFlow.email(1))
            #expect(result["emailVerified"] as? Bool == true)
            #expect(result["return"] as? String == "app")
            let status = try await flow.harness.escrow.status(userIdentifier: SignInFlow.userIdentifier(1))
            #expect(result["escrowId"] as? String == status?.escrowID.hex)
            #expect(result["profileRefused"] is NSNull)
            #expect(try await flow.redeem(client, ticket).status == .gone, "a ticket is redeemed once")
            #expect(try await flow.redeem(client, "unknown-ticket").status == .gone, "an unknown one is gone too")
            let wrongScope = try await flow.redeem(client, ticket, token: "capture")
            #expect(wrongScope.status == .forbidden)

            // A reload of the callback (the cookie is gone) captures nothing more.
            let reload = try await flow.callback(client, form, cookie: nil)
            #expect(reload.status == .seeOther)
            #expect(reload.headers[.location] == SignInFlow.returnURL + "?error=signin_expired")
            let again = try await flow.callback(client, form, cookie: start.cookie)
            #expect(again.headers[.location] == SignInFlow.returnURL + "?error=signin_expired")
            #expect(try await flow.captures() == 1, "one capture whatever the reloads")
            let signInEvents = try await flow.harness.auditEvents().filter { $0.draft.type == .captured }
            #expect(signInEvents.map(\.draft.escrowID) == [status?.escrowID.hex], "captured, once")
            #expect(signInEvents.first?.draft.detail == "web-signin")
            #expect(signInEvents.first?.draft.actor == .apple)
            let secrets = [form["code"]!, form["id_token"]!, form["state"]!, start.nonce, ticket, start.cookie]
            try flow.expectNothingSecretLogged(secrets)
            for file in flow.harness.fixture.storeFiles() {
                for secret in secrets + ["Fakegiven", "fakesignin", "testsignin"] {
                    let cut = String(secret.split(separator: "=").last ?? "")
                    #expect(!file.bytes.contains(bytes: Array(cut.utf8)), "no secret in clear in \(file.name)")
                }
            }
        }
    }

    @Test("a returning user (no user field) signs in and nothing is captured")
    func returningUser() async throws {
        let flow = try await SignInFlow()
        try await flow.harness.app().test(.live) { client async throws in
            let start = try await flow.start(client)
            let callback = try await flow.callback(client, try await flow.form(start, user: nil), cookie: start.cookie)
            let ticket = try #require(SignInFlow.query(callback.headers[.location] ?? "")["ticket"])
            let result = try await flow.redeem(client, ticket).json
            #expect(result["escrowId"] is NSNull)
            #expect(result["userIdentifier"] as? String == SignInFlow.userIdentifier(1))
            #expect(try await flow.captures() == 0)
        }
    }

    @Test("forged, expired and cancelled states capture nothing")
    func statesRefused() async throws {
        let flow = try await SignInFlow()
        try await flow.harness.app().test(.live) { client async throws in
            let start = try await flow.start(client)
            var forged = try await flow.form(start, user: SignInFlow.userJSON(1))
            forged["state"] = Base64URL.encode(Hashing.randomBytes(count: 32))
            let unknown = try await flow.callback(client, forged, cookie: start.cookie)
            #expect(unknown.status == .badRequest, "an unknown state: a page, no redirect")
            #expect(unknown.headers[.location] == nil)
            #expect(unknown.headers[.cacheControl] == "no-store")

            let cancelled = try await flow.start(client)
            let cancel = try await flow.callback(
                client,
                ["state": cancelled.state, "error": "user_cancelled_authorize"],
                cookie: cancelled.cookie
            )
            #expect(cancel.headers[.location] == SignInFlow.returnURL + "?error=user_cancelled_authorize")

            let form = try await flow.form(start, user: SignInFlow.userJSON(1))
            flow.harness.clock.offset = 601
            let expired = try await flow.callback(client, form, cookie: start.cookie)
            #expect(expired.headers[.location] == SignInFlow.returnURL + "?error=signin_expired")
            #expect(expired.headers[.setCookie]?.contains("Max-Age=0") == true)
            #expect(try await flow.captures() == 0)
        }
    }

    @Test("a missing or another browser's cookie is refused, and the cookie is left alone")
    func bindingRefused() async throws {
        let flow = try await SignInFlow()
        try await flow.harness.app().test(.live) { client async throws in
            let mine = try await flow.start(client)
            let theirs = try await flow.start(client)
            let form = try await flow.form(mine, user: SignInFlow.userJSON(1))
            let forged = [
                AppleSignInRoutes.legacyCookieName + "=forged",
                AppleSignInRoutes.cookieName(state: mine.state) + "=forged",
            ]
            for cookie in [nil, theirs.cookie] + forged {
                let refused = try await flow.callback(client, form, cookie: cookie)
                #expect(refused.headers[.location] == SignInFlow.returnURL + "?error=signin_invalid")
                #expect(refused.headers[.setCookie] == nil, "never cleared on a binding mismatch")
            }
            #expect(try await flow.captures() == 0)
            // The real browser's attempt is still live.
            let mineNow = try await flow.callback(client, form, cookie: mine.cookie)
            #expect(mineNow.headers[.location]?.hasPrefix(SignInFlow.returnURL + "?ticket=") == true)
            #expect(try await flow.captures() == 1)
        }
    }

    @Test(
        "an id_token with a wrong nonce, audience, issuer or expiry is refused",
        arguments: ["nonce", "audience", "issuer", "expiry", "unsigned"]
    )
    func tokenRefused(_ wrong: String) async throws {
        let flow = try await SignInFlow()
        try await flow.harness.app().test(.live) { client async throws in
            let start = try await flow.start(client)
            var claims = SignInFlow.Claims(sub: SignInFlow.userIdentifier(1), nonce: start.nonce)
            switch wrong {
            case "nonce": claims.nonce = Base64URL.encode(Hashing.randomBytes(count: 32))
            case "audience": claims.aud = AppleTestKeys.audience
            case "issuer": claims.iss = "https://appleid.example.invalid"
            case "expiry": claims.exp = Int(Date().timeIntervalSince1970) - 3600
            default: break
            }
            var form = try await flow.form(start, user: SignInFlow.userJSON(1), claims: claims)
            if wrong == "unsigned" {
                form["id_token"] = try AppleTestKeys.shared.forge(
                    header: ["alg": "none", "kid": AppleTestKeys.rsaKid],
                    claims: claims
                )
            }
            let refused = try await flow.callback(client, form, cookie: start.cookie)
            #expect(refused.headers[.location] == SignInFlow.returnURL + "?error=signin_invalid")
            #expect(try await flow.captures() == 0)
        }
    }

    @Test(
        "a hostile user field captures nothing but the sign-in goes on",
        arguments: [
            ("{\"name\":{\"firstName\":\"Fakegiven1\",\"firstName\":\"Other\"}}", "user_invalid_json"),
            ("{\"name\":{\"firstName\":\"Fake\\u0007given\"}}", nil),
            ("{\"name\":{\"firstName\":\"Fake\\u202Egiven\"}}", nil),
            ("{\"name\":{\"firstName\":\"Fakegiven1\"},\"admin\":true}", "user_invalid"),
            ("[\"Fakegiven1\"]", "user_invalid_json"),
            ("{\"name\":", "user_invalid_json"),
            ("{\"name\":{\"firstName\":\"" + String(repeating: "a", count: 5000) + "\"}}", "user_too_large"),
        ] as [(String, String?)]
    )
    func hostileUser(_ user: String, _ code: String?) async throws {
        let flow = try await SignInFlow()
        try await flow.harness.app().test(.live) { client async throws in
            let start = try await flow.start(client)
            let callback = try await flow.callback(client, try await flow.form(start, user: user), cookie: start.cookie)
            let ticket = try #require(SignInFlow.query(callback.headers[.location] ?? "")["ticket"])
            let result = try await flow.redeem(client, ticket).json
            #expect(result["escrowId"] is NSNull)
            let refused = try #require(result["profileRefused"] as? String)
            if let code { #expect(refused == code) }
            #expect(try await flow.captures() == 0)
        }
    }

    @Test("with the store down: no acknowledgement, a page that posts the same form again; then captured once")
    func storeDown() async throws {
        let flow = try await SignInFlow()
        let store = FailingSignInStore(flow.harness.store)
        try await flow.harness.app(signIns: store).test(.live) { client async throws in
            let start = try await flow.start(client)
            let form = try await flow.form(start, user: SignInFlow.userJSON(1))
            store.failing.withLockedValue { $0 = true }
            let down = try await flow.callback(client, form, cookie: start.cookie)
            #expect(down.status == .serviceUnavailable)
            #expect(down.headers[.cacheControl] == "no-store")
            #expect(down.headers[.location] == nil && down.headers[.setCookie] == nil, "nothing acknowledged")
            let page = down.text
            #expect(page.contains("<button type=\"submit\">"))
            #expect(page.contains("action=\"\(SignInFlow.callbackURL)\""))
            let resubmission = SignInFlow.hiddenFields(page)
            for (name, value) in form { #expect(resubmission[name] == value, "\(name) kept") }
            #expect(resubmission["pe_stamp"] != nil, "stamped with its first receipt")
            // The script that posts the form again is a file of the service's own, allowed by `script-src 'self'`:
            // the page holds no inline script, and the policy no nonce, hash or unsafe source.
            #expect(page.contains("<script src=\"resubmit.js\"></script>"))
            let policy = try #require(down.headers[.contentSecurityPolicy])
            #expect(policy.contains("script-src 'self';") && !policy.contains("nonce") && !policy.contains("unsafe"))
            let script = try await client.execute(uri: "/v1/apple/signin/resubmit.js", method: .get)
            #expect(script.status == .ok && script.headers[.contentType] == "text/javascript; charset=utf-8")
            #expect(script.text.contains("document.getElementById(\"resubmit\").submit()"))
            // Browsers apply form-action to the post's redirect too: the return URL's origin must be allowed, or the
            // browser stays on this page after the capture (found by the browser suite).
            #expect(
                down.headers[.contentSecurityPolicy]?.contains("form-action 'self' https://app.example.invalid;")
                    == true
            )
            #expect(try await flow.captures() == 0)
            // The store is back after the attempt's life: the page's re-submission (the same form, the service's stamp,
            // the same cookie) is judged by its first receipt and goes through, once; the bare form or a changed stamp
            // is judged now, and refused.
            store.failing.withLockedValue { $0 = false }
            flow.harness.clock.offset = 700
            let bare = try await flow.callback(client, form, cookie: start.cookie)
            #expect(bare.headers[.location] == SignInFlow.returnURL + "?error=signin_expired")
            var tampered = resubmission
            tampered["pe_stamp"] = tampered["pe_stamp"]!.replacingOccurrences(of: ".1.", with: ".0.")
            let changed = try await flow.callback(client, tampered, cookie: start.cookie)
            #expect(changed.headers[.location] == SignInFlow.returnURL + "?error=signin_expired")
            var otherForm = resubmission
            otherForm["user"] = SignInFlow.userJSON(2)
            let moved = try await flow.callback(client, otherForm, cookie: start.cookie)
            #expect(moved.headers[.location] == SignInFlow.returnURL + "?error=signin_expired", "bound to the form")
            #expect(try await flow.captures() == 0)
            let retried = try await flow.callback(client, resubmission, cookie: start.cookie)
            #expect(retried.headers[.location]?.hasPrefix(SignInFlow.returnURL + "?ticket=") == true)
            let twice = try await flow.callback(client, resubmission, cookie: start.cookie)
            #expect(twice.headers[.location] == SignInFlow.returnURL + "?error=signin_expired")
            #expect(try await flow.captures() == 1)
        }
    }

    @Test("the retention sweep deletes attempts past their life; their callback is then unknown")
    func sweep() async throws {
        let flow = try await SignInFlow()
        try await flow.harness.app().test(.live) { client async throws in
            let start = try await flow.start(client)
            let form = try await flow.form(start, user: SignInFlow.userJSON(1))
            _ = try await flow.harness.escrow.sweep()
            let stateHash = Hashing.blake2b256(Array(start.state.utf8))
            #expect(try await flow.harness.store.signInAttempt(stateHash: stateHash) != nil, "live: kept")
            flow.harness.clock.offset = 600
            _ = try await flow.harness.escrow.sweep()
            #expect(
                try await flow.harness.store.signInAttempt(stateHash: stateHash) != nil,
                "expired, kept for a resubmission's grace"
            )
            flow.harness.clock.offset = 600 + SignInAttempt.resubmissionGrace
            _ = try await flow.harness.escrow.sweep()
            #expect(try await flow.harness.store.signInAttempt(stateHash: stateHash) == nil, "then swept")
            #expect(try await flow.callback(client, form, cookie: start.cookie).status == .badRequest)
        }
    }

    @Test("a ticket past its 5 minutes is gone; a callback from a foreign origin is refused")
    func ticketExpiryAndOrigin() async throws {
        let flow = try await SignInFlow()
        try await flow.harness.app().test(.live) { client async throws in
            let start = try await flow.start(client)
            let form = try await flow.form(start, user: SignInFlow.userJSON(1))
            var headers: HTTPFields = [
                .contentType: "application/x-www-form-urlencoded", .origin: "https://evil.example",
            ]
            headers[.cookie] = start.cookie
            let foreign = try await client.execute(
                uri: "/v1/apple/signin/callback",
                method: .post,
                headers: headers,
                body: ByteBuffer(string: "state=\(SignInForm.encode(start.state))")
            )
            #expect(foreign.status == .badRequest)
            #expect(try await flow.captures() == 0)
            let callback = try await flow.callback(client, form, cookie: start.cookie)
            let ticket = try #require(SignInFlow.query(callback.headers[.location] ?? "")["ticket"])
            flow.harness.clock.offset = 300
            #expect(try await flow.redeem(client, ticket).status == .gone, "the code's own life is over")
        }
    }

    @Test("with the store not answering even reads: the page's stamp vouches for the id_token of its first receipt")
    func storeUnreadable() async throws {
        let flow = try await SignInFlow()
        let store = FailingSignInStore(flow.harness.store)
        try await flow.harness.app(signIns: store).test(.live) { client async throws in
            let start = try await flow.start(client)
            let form = try await flow.form(start, user: SignInFlow.userJSON(1))
            store.failing.withLockedValue { $0 = true }
            store.failingReads.withLockedValue { $0 = true }
            let down = try await flow.callback(client, form, cookie: start.cookie)
            #expect(down.status == .serviceUnavailable)
            let resubmission = SignInFlow.hiddenFields(down.text)
            #expect(resubmission["pe_stamp"]?.contains(".1.") == true, "the token verified at the first receipt")
            store.failing.withLockedValue { $0 = false }
            store.failingReads.withLockedValue { $0 = false }
            // Past the attempt's life and the id_token's (10 minutes): judged by the first receipt.
            flow.harness.clock.offset = 900
            let retried = try await flow.callback(client, resubmission, cookie: start.cookie)
            #expect(retried.headers[.location]?.hasPrefix(SignInFlow.returnURL + "?ticket=") == true)
            #expect(try await flow.captures() == 1)
        }
    }

    @Test("a stamp is honoured for 30 minutes after the first receipt, not longer")
    func stampWindow() async throws {
        let flow = try await SignInFlow()
        let store = FailingSignInStore(flow.harness.store)
        try await flow.harness.app(signIns: store).test(.live) { client async throws in
            let start = try await flow.start(client)
            store.failing.withLockedValue { $0 = true }
            let down = try await flow.callback(
                client,
                try await flow.form(start, user: SignInFlow.userJSON(1)),
                cookie: start.cookie
            )
            let resubmission = SignInFlow.hiddenFields(down.text)
            store.failing.withLockedValue { $0 = false }
            flow.harness.clock.offset = SignInAttempt.resubmissionGrace + 1
            let late = try await flow.callback(client, resubmission, cookie: start.cookie)
            #expect(late.headers[.location] == SignInFlow.returnURL + "?error=signin_expired")
            #expect(try await flow.captures() == 0)
        }
    }

    @Test("past the limit of all clients together, a callback is answered with the page that posts it again")
    func rateLimitedCallback() async throws {
        var limited = try await SignInFlow()
        limited.harness.configuration.anonymousOverallRateLimit = RateLimit(requestsPerSecond: 0.001, burst: 1)
        let flow = limited
        try await flow.harness.app().test(.live) { client async throws in
            let start = try await flow.start(client)
            let form = try await flow.form(start, user: SignInFlow.userJSON(1))
            var forged = form
            forged["state"] = Base64URL.encode(Hashing.randomBytes(count: 32))
            #expect(try await flow.callback(client, forged, cookie: start.cookie).status == .badRequest)
            let limited = try await flow.callback(client, form, cookie: start.cookie)
            #expect(limited.status == .serviceUnavailable)
            #expect(SignInFlow.hiddenFields(limited.text)["user"] == form["user"], "the browser keeps the profile")
            #expect(try await flow.captures() == 0)
        }
    }

    @Test("an unknown return name is refused with 400, never redirected")
    func unknownReturn() async throws {
        let flow = try await SignInFlow()
        try await flow.harness.app().test(.live) { client async throws in
            let response = try await client.execute(
                uri: "/v1/apple/signin?return=https%3A%2F%2Fevil.example",
                method: .get
            )
            #expect(response.status == .badRequest)
            #expect(response.headers[.location] == nil && response.headers[.setCookie] == nil)
        }
    }
}

/// The stand-in for Apple and the browser: a test key signs id_tokens, its JWKS is a file the service reads.
struct SignInFlow {
    static let clientID = "invalid.example.profile-escrow.web"
    static let callbackURL = "https://escrow.example.invalid/v1/apple/signin/callback"
    static let returnURL = "https://app.example.invalid/signed-in"
    static let authorizeURL = "https://apple.example.invalid/auth/authorize"

    static func userIdentifier(_ number: Int) -> String { "000000.testsignin\(String(format: "%020d", number)).0001" }
    static func email(_ number: Int) -> String { "fakesignin\(number)@example.invalid" }
    static func userJSON(_ number: Int) -> String {
        "{\"name\":{\"firstName\":\"Fakegiven\(number)\",\"lastName\":\"Fakefamily\(number)\"},"
            + "\"email\":\"fakeother\(number)@example.invalid\"}"
    }

    struct Claims: JWTPayload {
        var iss = AppleVerifier.issuer
        var aud = SignInFlow.clientID
        var exp = Int(Date().timeIntervalSince1970) + 600
        var iat = Int(Date().timeIntervalSince1970)
        var sub: String
        var nonce: String?
        var email: String? = SignInFlow.email(1)
        var email_verified: String? = "true"
        var c_hash: String?
        var transfer_sub: String?

        func verify(using _: some JWTAlgorithm) async throws {}
    }

    struct Started {
        let response: TestResponse
        let state: String
        let nonce: String
        /// The `Cookie` header the browser sends back.
        let cookie: String
    }

    var harness: HTTPHarness

    init() async throws {
        harness = try await HTTPHarness()
        let jwksPath = harness.fixture.directory.path + "/apple-jwks.json"
        try Data(AppleTestKeys.shared.jwks).write(to: URL(fileURLWithPath: jwksPath))
        harness.dependencies.apple = try await AppleVerifier.load(
            jwksPath: jwksPath,
            audiences: [AppleTestKeys.audience]
        )
        var signIn = AppleSignInConfiguration(
            clientID: Self.clientID,
            callbackURL: Self.callbackURL,
            returns: ["app": Self.returnURL]
        )
        signIn.authorizeURL = Self.authorizeURL
        harness.configuration.signIn = signIn
    }

    func start(_ client: some TestClientProtocol, appState: String? = nil) async throws -> Started {
        let extra = appState.map { "&appState=\(SignInForm.encode($0))" } ?? ""
        let response = try await client.execute(uri: "/v1/apple/signin?return=app" + extra, method: .get)
        let query = Self.query(response.headers[.location] ?? "")
        let cookie = response.headers[.setCookie]?.split(separator: ";").first.map(String.init) ?? ""
        return Started(response: response, state: query["state"] ?? "", nonce: query["nonce"] ?? "", cookie: cookie)
    }

    /// Apple's form_post for `started`, as its authorize page would send it.
    func form(_ started: Started, user: String?, claims: Claims? = nil) async throws -> [String: String] {
        let claims = claims ?? Claims(sub: Self.userIdentifier(1), nonce: started.nonce)
        var form = [
            "state": started.state, "code": "c.fake-code-\(UUID().uuidString)",
            "id_token": try await AppleTestKeys.shared.sign(claims),
        ]
        if let user { form["user"] = user }
        return form
    }

    func callback(
        _ client: some TestClientProtocol,
        _ form: [String: String],
        cookie: String?
    ) async throws
        -> TestResponse
    {
        var headers: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
        if let cookie { headers[.cookie] = cookie }
        let body = form.sorted { $0.key < $1.key }
            .map { "\(SignInForm.encode($0.key))=\(SignInForm.encode($0.value))" }.joined(separator: "&")
        return try await client.execute(
            uri: "/v1/apple/signin/callback",
            method: .post,
            headers: headers,
            body: ByteBuffer(string: body)
        )
    }

    func redeem(
        _ client: some TestClientProtocol,
        _ ticket: String,
        token: String = "signin"
    ) async throws
        -> TestResponse
    {
        try await client.execute(
            uri: "/v1/apple/signin/tickets/redeem",
            method: .post,
            headers: harness.headers(token, json: true),
            body: Fake.body(["ticket": ticket])
        )
    }

    /// How many escrows were ever captured (audit events).
    func captures() async throws -> Int {
        try await harness.auditEvents().filter { $0.draft.type == .captured }.count
    }

    func expectNothingSecretLogged(_ secrets: [String]) throws {
        let logged = harness.loggedText()
        for secret in secrets + ["Fakegiven", "Fakefamily", "fakesignin", "fakeother", "testsignin"] {
            #expect(!logged.contains(secret), "nothing secret or personal logged")
        }
    }

    /// The hidden fields of the 503 page's form, as the browser posts them again.
    static func hiddenFields(_ page: String) -> [String: String] {
        var fields: [String: String] = [:]
        let pattern = try! NSRegularExpression(pattern: "<input type=\"hidden\" name=\"([^\"]*)\" value=\"([^\"]*)\">")
        let range = NSRange(page.startIndex..., in: page)
        for match in pattern.matches(in: page, range: range) {
            let name = String(page[Range(match.range(at: 1), in: page)!])
            let value = String(page[Range(match.range(at: 2), in: page)!])
                .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&#39;", with: "'")
                .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
                .replacingOccurrences(of: "&amp;", with: "&")
            fields[name] = value
        }
        return fields
    }

    static func query(_ url: String) -> [String: String] {
        var result: [String: String] = [:]
        for item in URLComponents(string: url)?.queryItems ?? [] { result[item.name] = item.value }
        return result
    }
}

/// The fixture's store, failing every sign-in write while `failing` is set: a store that is down or partitioned.
final class FailingSignInStore: SignInStore {
    let base: SQLiteEscrowStore
    let failing = NIOLockedValueBox(false)
    /// Reads fail too: the store does not answer at all.
    let failingReads = NIOLockedValueBox(false)

    init(_ base: SQLiteEscrowStore) { self.base = base }

    func check() throws {
        if failing.withLockedValue({ $0 }) { throw EscrowStoreError(.unavailable, "the test's store is down") }
    }

    func createSignInAttempt(_ attempt: SignInAttempt) async throws {
        try check()
        try await base.createSignInAttempt(attempt)
    }

    func signInAttempt(stateHash: [UInt8]) async throws -> SignInAttempt? {
        if failingReads.withLockedValue({ $0 }) { throw EscrowStoreError(.unavailable, "the test's store is down") }
        return try await base.signInAttempt(stateHash: stateHash)
    }

    func completeSignIn(
        _ request: SignInCompletionRequest,
        capture record: EscrowRecord?,
        actor: AuditActor,
        lifecycle: EscrowLifecycle
    ) async throws -> SignInCompletion {
        try check()
        return try await base.completeSignIn(request, capture: record, actor: actor, lifecycle: lifecycle)
    }

    func redeemSignInTicket(
        _ key: SignInTicketKey,
        starterHash: [UInt8]?,
        at now: Date
    ) async throws
        -> SignInRedemption?
    {
        try check()
        return try await base.redeemSignInTicket(key, starterHash: starterHash, at: now)
    }

    func unredeemedSignInTicket(_ key: SignInTicketKey, at now: Date) async throws -> [UInt8]? {
        if failingReads.withLockedValue({ $0 }) { throw EscrowStoreError(.unavailable, "the test's store is down") }
        return try await base.unredeemedSignInTicket(key, at: now)
    }

    func sweepSignInAttempts(at now: Date) async throws -> Int {
        try check()
        return try await base.sweepSignInAttempts(at: now)
    }
}
