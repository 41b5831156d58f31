import CryptoExtras
import Foundation

/// A stand-in for Apple's signing key: a fresh RSA key, the JWKS file that publishes its public half (what `serve`
/// is given as `--apple-jwks`), and RS256 identity tokens signed with it, as Apple signs them for an app.
struct TestAppleSigner: Sendable {
    static let kid = "client-test-kid"
    /// The app's bundle ID (a native audience) and the web flow's Services ID.
    static let appAudience = "invalid.example.app"
    static let webAudience = "invalid.example.web"

    private let key: _RSA.Signing.PrivateKey

    /// One RSA key generation per test process: it is slow in debug builds.
    static let shared = TestAppleSigner(key: try! _RSA.Signing.PrivateKey(keySize: .bits2048))

    /// The JWKS document of the public key.
    var jwks: Data {
        let primitives = try! key.publicKey.getKeyPrimitives()
        let object: [String: Any] = [
            "keys": [
                [
                    "kty": "RSA", "kid": Self.kid, "use": "sig", "alg": "RS256",
                    "n": Self.base64URL(primitives.modulus), "e": Self.base64URL(primitives.publicExponent),
                ]
            ]
        ]
        return try! JSONSerialization.data(withJSONObject: object)
    }

    /// An identity token for `sub`, whose `nonce` is what the app passed to Apple (the attempt's `nonceSHA256`).
    func identityToken(
        sub: String,
        nonce: String,
        email: String? = nil,
        audience: String = Self.appAudience
    ) throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        var claims: [String: Any] = [
            "iss": "https://appleid.apple.com", "aud": audience, "exp": now + 600, "iat": now, "sub": sub,
            "nonce": nonce, "nonce_supported": true, "real_user_status": 2,
        ]
        if let email {
            claims["email"] = email
            claims["email_verified"] = "true"
            claims["is_private_email"] = "false"
        }
        let header = try JSONSerialization.data(withJSONObject: ["alg": "RS256", "kid": Self.kid, "typ": "JWT"])
        let input = Self.base64URL(header) + "." + Self.base64URL(try JSONSerialization.data(withJSONObject: claims))
        let signature = try key.signature(for: Data(input.utf8), padding: .insecurePKCS1v1_5)
        return input + "." + Self.base64URL(signature.rawRepresentation)
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}
