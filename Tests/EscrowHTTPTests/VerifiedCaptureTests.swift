import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
import NIOCore
import ProfileEscrow
import Testing

@testable import EscrowHTTP

@Suite("Verified capture: Apple identity tokens checked against a local RSA/EC key and JWKS")
struct VerifiedCaptureTests {
    let keys = AppleTestKeys.shared

    func claims(_ number: Int = 1) -> AppleTestKeys.IdentityClaims {
        AppleTestKeys.IdentityClaims(sub: Fake.userIdentifier(number), email: Fake.email(number))
    }

    func capture(_ harness: HTTPHarness, token: String?, number: Int = 1) async throws -> TestResponse {
        try await harness.app().test(.router) { client async throws in
            try await client.execute(
                uri: "/v1/escrows",
                method: .post,
                headers: harness.headers("capture", json: true),
                body: Fake.body(number, identityToken: token)
            )
        }
    }

    @Test("a valid RS256 token passes and the escrow is recorded as verified")
    func validRS256() async throws {
        let harness = try await HTTPHarness(apple: try await keys.verifier())
        let response = try await capture(harness, token: try await keys.sign(claims()))
        #expect(response.status == .created)
        let plaintext = try await harness.escrow.replay(userIdentifier: Fake.userIdentifier(1))
        #expect(plaintext.verified)
        #expect(plaintext.emailVerified == true, "the token signed the email")
    }

    @Test("an email the token does not carry is captured as unverified, and delivered so")
    func unsignedEmail() async throws {
        let harness = try await HTTPHarness(apple: try await keys.verifier())
        var claims = claims()
        claims.email = nil
        let response = try await capture(harness, token: try await keys.sign(claims))
        #expect(response.status == .created)
        let plaintext = try await harness.escrow.replay(userIdentifier: Fake.userIdentifier(1))
        #expect(plaintext.verified && plaintext.profile.email == Fake.email(1))
        #expect(plaintext.emailVerified == false)
        let body = String(decoding: plaintext.backendJSON(escrowId: "x", attempt: 1), as: UTF8.self)
        #expect(body.hasSuffix("\"verified\":true,\"emailVerified\":false,\"attempt\":1}"))
    }

    @Test("a valid ES256 token passes; email compared case-insensitively")
    func validES256() async throws {
        let harness = try await HTTPHarness(apple: try await keys.verifier())
        var claims = claims()
        claims.email = Fake.email(1).uppercased()
        let response = try await capture(harness, token: try await keys.sign(claims, ec: true))
        #expect(response.status == .created)
    }

    func capture(_ harness: HTTPHarness, object: [String: Any], token: String) async throws -> TestResponse {
        var object = object
        object["identityToken"] = token
        let body = Fake.body(object)
        return try await harness.app().test(.router) { client async throws in
            try await client.execute(
                uri: "/v1/escrows",
                method: .post,
                headers: harness.headers("capture", json: true),
                body: body
            )
        }
    }

    @Test("realUserStatus and isPrivateEmail come from the token when it has them")
    func tokenFacts() async throws {
        let harness = try await HTTPHarness(apple: try await keys.verifier())
        var object = Fake.profileObject(1)
        object["realUserStatus"] = nil
        var claims = claims()
        claims.real_user_status = 1
        claims.is_private_email = "true"
        let response = try await capture(harness, object: object, token: try await keys.sign(claims))
        #expect(response.status == .created)
        let plaintext = try await harness.escrow.replay(userIdentifier: Fake.userIdentifier(1))
        #expect(plaintext.profile.realUserStatus == .unknown, "taken from the token")
        #expect(plaintext.profile.isPrivateEmail, "taken from the token, not derived from the domain")
        #expect(plaintext.verified)
    }

    @Test("a body that contradicts the token's realUserStatus or isPrivateEmail is refused")
    func tokenContradicted() async throws {
        let harness = try await HTTPHarness(apple: try await keys.verifier())
        var status = claims()
        status.real_user_status = 0  // unsupported; the body says likelyReal
        let refused = try await capture(harness, object: Fake.profileObject(1), token: try await keys.sign(status))
        #expect(refused.status == .unauthorized)
        #expect(refused.json["code"] as? String == "identity_token_invalid")

        var relay = claims()
        relay.is_private_email = "true"
        var object = Fake.profileObject(1)
        object["isPrivateEmail"] = false
        let contradicted = try await capture(harness, object: object, token: try await keys.sign(relay))
        #expect(contradicted.status == .unauthorized)
        #expect(try await harness.liveCount() == 0)
    }

    enum Attack: String, CaseIterable, Sendable {
        case missing, badSignature, algNone, hs256WithPublicKey, unknownKid, wrongIssuer, wrongAudience, expired,
            issuedInFuture, subMismatch, emailMismatch, garbage
    }

    func token(for attack: Attack) async throws -> String? {
        let kid = AppleTestKeys.rsaKid
        switch attack {
        case .missing: return nil
        case .badSignature:
            let good = try await keys.sign(claims()).split(separator: ".")
            let other = try await keys.sign(claims(2)).split(separator: ".")
            return [good[0], other[1], good[2]].joined(separator: ".")
        case .algNone:
            return try keys.forge(header: ["alg": "none", "kid": kid, "typ": "JWT"], claims: claims())
        case .hs256WithPublicKey:
            let pem = Array(keys.rsaPrivate.publicKey.pemRepresentation.utf8)
            return try keys.forge(header: ["alg": "HS256", "kid": kid, "typ": "JWT"], claims: claims(), hmacKey: pem)
        case .unknownKid:
            let good = try await keys.sign(claims()).split(separator: ".")
            let header = Base64URL.encode(Array("{\"alg\":\"RS256\",\"kid\":\"other-kid\",\"typ\":\"JWT\"}".utf8))
            return [Substring(header), good[1], good[2]].joined(separator: ".")
        case .wrongIssuer:
            var claims = claims()
            claims.iss = "https://appleid.example.invalid"
            return try await keys.sign(claims)
        case .wrongAudience:
            var claims = claims()
            claims.aud = "invalid.example.other-app"
            return try await keys.sign(claims)
        case .expired:
            var claims = claims()
            claims.iat -= 7200
            claims.exp = claims.iat + 600
            return try await keys.sign(claims)
        case .issuedInFuture:
            var claims = claims()
            claims.iat += 3600
            claims.exp += 3600
            return try await keys.sign(claims)
        case .subMismatch:
            return try await keys.sign(AppleTestKeys.IdentityClaims(sub: Fake.userIdentifier(2), email: Fake.email(1)))
        case .emailMismatch:
            return try await keys.sign(AppleTestKeys.IdentityClaims(sub: Fake.userIdentifier(1), email: Fake.email(2)))
        case .garbage:
            return "not.a.jwt"
        }
    }

    @Test("every failure is the same generic 401, nothing stored, nothing personal logged", arguments: Attack.allCases)
    func rejected(_ attack: Attack) async throws {
        let harness = try await HTTPHarness(apple: try await keys.verifier())
        let response = try await capture(harness, token: try await token(for: attack))
        #expect(response.status == .unauthorized)
        #expect(response.json["code"] as? String == "identity_token_invalid")
        #expect(response.headers[.wwwAuthenticate] != nil)
        #expect(try await harness.liveCount() == 0)
        let logged = harness.loggedText()
        for canary in Fake.tokens { #expect(!logged.contains(canary)) }
    }

    @Test("without verified capture configured, an identity token is ignored and the escrow is unverified")
    func notConfigured() async throws {
        let harness = try await HTTPHarness()
        let response = try await capture(harness, token: "not.a.jwt")
        #expect(response.status == .created)
        #expect(try await harness.escrow.replay(userIdentifier: Fake.userIdentifier(1)).verified == false)
    }
}
