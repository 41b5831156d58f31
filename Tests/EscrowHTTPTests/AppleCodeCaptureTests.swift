import EscrowCore
import EscrowCrypto
import EscrowCustody
import EscrowSQLite
import EscrowTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import ProfileEscrow
import Testing

@testable import EscrowHTTP

/// A verified API capture (`POST /v1/escrows`) that carries the app's authorization code, over a real socket: the code
/// queued with the capture, redeemed once at a stand-in Apple on loopback that verifies every client secret, and the
/// refresh token delivered only in the signed body; a confirmation or a replay read that comes while Apple is slow
/// waits for it; the token follows a key rotation, rewrap and retirement. Bad input stores nothing.
@Suite("Verified capture with an authorization code")
struct AppleCodeCaptureTests {
    static let user = SignInFlow.userIdentifier(1)

    /// User 1's verified capture as an app's backend sends it: an identity token for the app (no email), whose
    /// `c_hash` is `hashed`'s, and `code` as `authorizationCode` (any JSON value; nil: none).
    static func body(code: Any?, hashing hashed: String?, identityToken: Bool = true) async throws -> ByteBuffer {
        var claims = SignInFlow.Claims(aud: AppleTestKeys.audience, sub: user, nonce: nil)
        claims.email = nil
        claims.c_hash = hashed.map(NativeFlow.codeHash)
        var object: [String: Any] = ["userIdentifier": user, "fullName": ["givenName": "Fakegiven1"]]
        if identityToken { object["identityToken"] = try await AppleTestKeys.shared.sign(claims) }
        if let code { object["authorizationCode"] = code }
        return Fake.body(object)
    }

    static func capture(
        _ client: some TestClientProtocol,
        _ harness: HTTPHarness,
        _ body: ByteBuffer
    ) async throws -> TestResponse {
        try await client.execute(
            uri: "/v1/escrows",
            method: .post,
            headers: harness.headers("capture", json: true),
            body: body
        )
    }

    /// A capture whose code the stand-in issued for the app: answered `201` with `appleTokens: "in-escrow"`.
    static func captureWithCode(
        _ client: some TestClientProtocol,
        _ exchange: AppleTokenExchangeTests.Exchange
    ) async throws -> String {
        let code = exchange.apple.issueCode(user: user, clientID: AppleTestKeys.audience)
        let answer = try await capture(client, exchange.flow.harness, try await body(code: code, hashing: code))
        #expect(answer.status == .created)
        #expect(answer.json["appleTokens"] as? String == "in-escrow", "the code is redeemed here")
        #expect(!answer.text.contains(code), "never echoed")
        return code
    }

    @Test("the code is redeemed once for the app, the first delivery held; the refresh token only in the signed body")
    func exchangedOnce() async throws {
        let exchange = try await AppleTokenExchangeTests.Exchange()
        let harness = exchange.flow.harness
        try await harness.app().test(.live) { client async throws in
            let code = try await Self.captureWithCode(client, exchange)
            #expect(try await exchange.running == 1, "queued with the capture")
            let status = try #require(try await harness.escrow.status(userIdentifier: Self.user))
            #expect(
                (status.nextAttemptAt ?? .distantPast) > Date().addingTimeInterval(200),
                "the first delivery held for the exchange"
            )
            // The same request again (its answer lost): the same escrow, still one exchange.
            let again = try await Self.capture(client, harness, try await Self.body(code: code, hashing: code))
            #expect(again.status == .ok && again.json["escrowId"] as? String == status.escrowID.hex)

            #expect(await exchange.exchanger.runOnce() == 1)
            #expect(await exchange.exchanger.runOnce() == 0, "exchanged once")
            let sent = try #require(exchange.apple.requests.first)
            #expect(exchange.apple.requests.count == 1, "one request to Apple")
            #expect(sent.secretValid == true, "with a client secret Apple accepts: \(sent.secretProblem ?? "")")
            #expect(sent.form["client_id"] == AppleTestKeys.audience, "for the app the token was issued to")
            #expect(sent.form["redirect_uri"] == nil, "an app's code has none")

            let refreshToken = try #require(exchange.apple.refreshTokens.first)
            let delivered = try await exchange.deliver()
            let tokens = try #require(delivered.body["appleTokens"] as? [String: Any])
            #expect(tokens["refreshToken"] as? String == refreshToken, "the refresh token in the signed body")
            #expect(delivered.body["verified"] as? Bool == true)
            let secret = try await exchange.secrets.secret(for: AppleTestKeys.audience).jwt
            exchange.expectNowhere([code, refreshToken, secret])
        }
        try await exchange.stop()
    }

    @Test(
        "refused naming the field, nothing stored: a code too long, not a string, another code's c_hash, no token",
        arguments: ["too long", "not a string", "c_hash", "no identityToken"]
    )
    func refused(_ fault: String) async throws {
        let exchange = try await AppleTokenExchangeTests.Exchange()
        let harness = exchange.flow.harness
        try await harness.app().test(.live) { client async throws in
            let code = "c.fake-code-\(UUID().uuidString)"
            let body: ByteBuffer
            let expected: (HTTPResponse.Status, String, String?)
            switch fault {
            case "too long":
                let long = String(repeating: "c", count: ProfileParser.maximumAuthorizationCodeSize + 1)
                body = try await Self.body(code: long, hashing: long)
                expected = (.badRequest, "invalid_value", "authorizationCode")
            case "not a string":
                body = try await Self.body(code: 12345, hashing: code)
                expected = (.badRequest, "invalid_type", "authorizationCode")
            case "c_hash":
                body = try await Self.body(code: code, hashing: "c.another-fake-code")
                expected = (.unauthorized, "authorization_code_mismatch", "authorizationCode")
            default:
                body = try await Self.body(code: code, hashing: code, identityToken: false)
                expected = (.unauthorized, "identity_token_invalid", nil)
            }
            let answer = try await Self.capture(client, harness, body)
            #expect(answer.status == expected.0)
            #expect(answer.json["code"] as? String == expected.1)
            #expect(answer.json["field"] as? String == expected.2)
            #expect(!answer.text.contains(code))
            #expect(try await harness.liveCount() == 0, "nothing captured")
            #expect(try await exchange.running == 0, "nothing queued")
            exchange.expectNowhere([code])
        }
        try await exchange.stop()
    }

    @Test("a service that verifies no identity token refuses a code (400), capturing nothing")
    func unverifiedServiceRefusesACode() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.live) { client async throws in
            let body = try await Self.body(code: "c.fake", hashing: "c.fake")
            let answer = try await Self.capture(client, harness, body)
            #expect(answer.status == .badRequest)
            #expect(answer.json["code"] as? String == "needs_verified_capture")
            #expect(answer.json["field"] as? String == "authorizationCode")
            // Nor does the library's capture of a JSON body, which verifies no token either.
            let refused = await #expect(throws: ProfileValidationError.self) {
                try await harness.escrow.capture(json: Array(body.readableBytesView))
            }
            #expect(refused?.code == .needsVerifiedCapture)
            #expect(try await harness.liveCount() == 0)
        }
    }

    @Test("without the exchange here, the profile is captured and delivered at once; the code dropped, never stored")
    func notExchangedHere() async throws {
        let flow = try await SignInFlow()
        let harness = flow.harness
        try await harness.app().test(.live) { client async throws in
            let code = "c.fake-code-\(UUID().uuidString)"
            let answer = try await Self.capture(client, harness, try await Self.body(code: code, hashing: code))
            #expect(answer.status == .created)
            #expect(answer.json["appleTokens"] == nil, "the code was not taken: its sender redeems it")
            let escrowID = try #require((answer.json["escrowId"] as? String).flatMap(EscrowID.init(hex:)))
            #expect(try await harness.store.appleExchanges(escrowID: escrowID).isEmpty)
            let status = try #require(try await harness.escrow.status(userIdentifier: Self.user))
            #expect((status.nextAttemptAt ?? .distantFuture) <= harness.clock.now(), "due at once, not held")
            #expect(!harness.loggedText().contains(code))
            for file in harness.fixture.storeFiles() {
                #expect(!file.bytes.contains(bytes: Array(code.utf8)), "not in \(file.name)")
            }
        }
    }

    @Test(
        "a confirmation or a replay read arriving while Apple is slow waits for the exchange and answers the token",
        arguments: ["confirm", "replay"]
    )
    func readerWaitsForTheExchange(_ route: String) async throws {
        let exchange = try await AppleTokenExchangeTests.Exchange()
        let harness = exchange.flow.harness
        try await harness.app().test(.live) { client async throws in
            _ = try await Self.captureWithCode(client, exchange)
            exchange.apple.script("/auth/token", [.delay(2)])
            let exchanging = Task { await exchange.exchanger.runOnce() }
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await exchange.running == 1, "Apple has not answered yet")
            let sent = ContinuousClock.now
            let answer = try await client.execute(
                uri: "/v1/escrows/\(Self.user)/\(route)",
                method: .post,
                headers: harness.headers(route)
            )
            let waited = sent.duration(to: .now)
            #expect(answer.status == .ok)
            #expect(await exchanging.value == 1)
            #expect(waited >= .seconds(1), "it waited for Apple's answer: \(waited)")
            let tokens = try #require(answer.json["appleTokens"] as? [String: Any])
            #expect(tokens["refreshToken"] as? String == exchange.apple.refreshTokens.first)
            if route == "confirm" {
                #expect(answer.json["purged"] as? Bool == true)
                #expect(try await harness.liveCount() == 0, "purged once the token was answered")
            } else {
                #expect(answer.json["userIdentifier"] as? String == Self.user)
            }
        }
        try await exchange.stop()
    }

    @Test(
        "after a key rotation, rewrap and retirement of the old version, the refresh token still opens and is delivered"
    )
    func refreshTokenFollowsRewrap() async throws {
        let exchange = try await AppleTokenExchangeTests.Exchange()
        let harness = exchange.flow.harness
        try await harness.app().test(.live) { client async throws in
            _ = try await Self.captureWithCode(client, exchange)
            #expect(await exchange.exchanger.runOnce() == 1)
            let escrow = harness.escrow
            let keyringPath = harness.fixture.directory.path + "/keyring"
            try escrow.keyring.write(path: keyringPath, overwrite: false)
            try escrow.replaceKeyring(try await escrow.rotateKeys(keyringPath: keyringPath))
            let rewrapped = try await escrow.rewrap()
            #expect(rewrapped.rewrapped == 1 && rewrapped.failed == 0)
            try escrow.replaceKeyring(try await escrow.retireKey(version: 1, keyringPath: keyringPath))
            #expect(escrow.keyring.keys.first { $0.version == 1 }?.hasSecretKey == false, "version 1 destroyed")

            let delivered = try await exchange.deliver()
            let tokens = try #require(delivered.body["appleTokens"] as? [String: Any])
            #expect(tokens["refreshToken"] as? String == exchange.apple.refreshTokens.first)
        }
        try await exchange.stop()
    }

    @Test("the admin overview counts the running exchanges and the revocations by state, as the console does")
    func overviewCountsAppleTokens() async throws {
        let exchange = try await AppleTokenExchangeTests.Exchange()
        let harness = exchange.flow.harness
        try await harness.app().test(.live) { client async throws in
            let overview = {
                let answer = try await client.execute(
                    uri: "/v1/admin/overview",
                    method: .get,
                    headers: harness.headers("read")
                )
                #expect(answer.status == .ok)
                return (answer.text, try #require(answer.json["appleTokens"] as? [String: Any]))
            }
            _ = try await Self.captureWithCode(client, exchange)
            let tokens = ["r.fake-token-1", "r.fake-token-2"]
            for token in tokens {
                let queued = try await client.execute(
                    uri: "/v1/apple/revocations",
                    method: .post,
                    headers: harness.headers("revoke", json: true),
                    body: Fake.body(["token": token, "tokenTypeHint": "refresh_token"])
                )
                #expect(queued.status == .accepted)
            }
            let (_, queued) = try await overview()
            #expect(queued["exchangesRunning"] as? Int == 1)
            let pending = try #require(queued["revocations"] as? [String: Int])
            #expect(pending == ["pending": 2, "revoked": 0, "failed": 0])

            // One refused for good (a single attempt allowed), one taken; the code redeemed.
            exchange.apple.script("/auth/revoke", [.error("invalid_request")])
            #expect(await exchange.revoker(maximumAttempts: 1).runOnce() == 2)
            #expect(await exchange.exchanger.runOnce() == 1)
            let (text, ended) = try await overview()
            #expect(ended["exchangesRunning"] as? Int == 0)
            #expect(try #require(ended["revocations"] as? [String: Int]) == ["pending": 0, "revoked": 1, "failed": 1])
            for token in tokens + [try #require(exchange.apple.refreshTokens.first)] {
                #expect(!text.contains(token), "counts only")
            }
        }
        try await exchange.stop()
    }
}
