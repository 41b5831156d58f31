import CryptoExtras
import EscrowCrypto
import Foundation
import JWTKit

@testable import EscrowHTTP

/// A locally generated RSA key (and an EC P-256 key) standing in for Apple's, with the JWKS file
/// that publishes their public halves, and helpers that sign identity tokens and notifications.
final class AppleTestKeys: Sendable {
    static let audience = "invalid.example.profile-escrow.tests"
    static let rsaKid = "test-rsa-kid"
    static let ecKid = "test-ec-kid"

    let rsaPrivate: JWTKit.Insecure.RSA.PrivateKey
    let ecPrivate: ES256PrivateKey
    let signers: JWTKeyCollection
    let jwks: [UInt8]

    /// One RSA key generation per test process: it is slow in debug builds.
    static let shared: AppleTestKeys = {
        let backing = try! _RSA.Signing.PrivateKey(keySize: .bits2048)
        return AppleTestKeys(rsa: try! JWTKit.Insecure.RSA.PrivateKey(backing: backing), ec: ES256PrivateKey())
    }()

    init(rsa: JWTKit.Insecure.RSA.PrivateKey, ec: ES256PrivateKey) {
        rsaPrivate = rsa
        ecPrivate = ec
        signers = JWTKeyCollection()
        let (modulus, exponent) = try! rsa.publicKey.getKeyPrimitives()
        let ecParameters = ec.publicKey.parameters!
        let object: [String: Any] = [
            "keys": [
                [
                    "kty": "RSA", "kid": Self.rsaKid, "use": "sig", "alg": "RS256",
                    "n": Base64URL.encode([UInt8](modulus)), "e": Base64URL.encode([UInt8](exponent)),
                ],
                [
                    "kty": "EC", "kid": Self.ecKid, "use": "sig", "crv": "P-256", "x": ecParameters.x,
                    "y": ecParameters.y,
                ],
            ]
        ]
        jwks = [UInt8](try! JSONSerialization.data(withJSONObject: object))
    }

    func verifier() async throws -> AppleVerifier {
        try await AppleVerifier(jwksJSON: jwks, audiences: [Self.audience])
    }

    /// Claims of an identity token, all overridable.
    struct IdentityClaims: JWTPayload {
        var iss = AppleVerifier.issuer
        var aud = AppleTestKeys.audience
        var exp = Int(Date().timeIntervalSince1970) + 600
        var iat = Int(Date().timeIntervalSince1970)
        var sub: String
        var email: String?
        var is_private_email: String?
        var real_user_status: Int?

        func verify(using _: some JWTAlgorithm) async throws {}
    }

    struct NotificationClaims: JWTPayload {
        var iss = AppleVerifier.issuer
        var aud = AppleTestKeys.audience
        var iat = Int(Date().timeIntervalSince1970)
        var jti = UUID().uuidString
        var events: String

        func verify(using _: some JWTAlgorithm) async throws {}
    }

    func sign(_ claims: some JWTPayload, ec: Bool = false) async throws -> String {
        let keys = JWTKeyCollection()
        if ec {
            await keys.add(ecdsa: ecPrivate, kid: JWKIdentifier(string: Self.ecKid))
            return try await keys.sign(claims, kid: JWKIdentifier(string: Self.ecKid))
        }
        await keys.add(rsa: rsaPrivate, digestAlgorithm: .sha256, kid: JWKIdentifier(string: Self.rsaKid))
        return try await keys.sign(claims, kid: JWKIdentifier(string: Self.rsaKid))
    }

    /// A token with a hand-made header: `alg: none`, HS256 keyed with the RSA public key, an unknown kid.
    func forge(header: [String: Any], claims: some Encodable, hmacKey: [UInt8]? = nil) throws -> String {
        let headerPart = Base64URL.encode([UInt8](try JSONSerialization.data(withJSONObject: header)))
        let payloadPart = Base64URL.encode([UInt8](try JSONEncoder().encode(claims)))
        let input = headerPart + "." + payloadPart
        let signature =
            hmacKey.map { Base64URL.encode(Hashing.hmacSHA256(key: $0, message: Array(input.utf8))) } ?? ""
        return input + "." + signature
    }

    /// `eventTime` defaults to one second from now (milliseconds, as Apple sends it): after any capture the
    /// test made before.
    static func events(
        _ type: String,
        sub: String,
        email: String? = nil,
        isPrivate: String? = nil,
        eventTime: Date = Date().addingTimeInterval(1)
    ) -> String {
        var object: [String: Any] = [
            "type": type, "sub": sub, "event_time": Int64(eventTime.timeIntervalSince1970 * 1000),
        ]
        if let email { object["email"] = email }
        if let isPrivate { object["is_private_email"] = isPrivate }
        return String(decoding: try! JSONSerialization.data(withJSONObject: object), as: UTF8.self)
    }
}
