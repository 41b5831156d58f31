import Foundation
import JWTKit

/// The keys of an Apple JWKS file (`https://appleid.apple.com/auth/keys`, saved by the operator),
/// restricted to the algorithms this service accepts: RS256 (RSA keys) and ES256 (EC P-256 keys).
///
/// Each key is bound to exactly one algorithm here, so the token's `alg` header can never make a key
/// be used with another algorithm (HS256 with an RSA public key as the HMAC secret, `none`, PS256).
struct AppleJWKS: Sendable {
    /// kid → the one algorithm its key is used with.
    let algorithms: [String: String]
    let keys: JWTKeyCollection

    static let allowedAlgorithms: Set<String> = ["RS256", "ES256"]

    struct LoadError: Error, CustomStringConvertible {
        let description: String
    }

    init(json: [UInt8]) async throws {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json)) as? [String: Any],
            let entries = object["keys"] as? [[String: Any]]
        else {
            throw LoadError(description: "the JWKS file is not a JSON object with a keys array")
        }
        let keys = JWTKeyCollection()
        var algorithms: [String: String] = [:]
        for entry in entries {
            guard let kid = entry["kid"] as? String, !kid.isEmpty else { continue }
            if let use = entry["use"] as? String, use != "sig" { continue }
            let declared = entry["alg"] as? String
            switch entry["kty"] as? String {
            case "RSA":
                guard declared == nil || declared == "RS256", let n = entry["n"] as? String,
                    let e = entry["e"] as? String
                else { continue }
                let key = try Insecure.RSA.PublicKey(modulus: n, exponent: e)
                await keys.add(rsa: key, digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
                algorithms[kid] = "RS256"
            case "EC":
                guard declared == nil || declared == "ES256", entry["crv"] as? String == "P-256",
                    let x = entry["x"] as? String, let y = entry["y"] as? String
                else { continue }
                let key = try ES256PublicKey(parameters: (x, y))
                await keys.add(ecdsa: key, kid: JWKIdentifier(string: kid))
                algorithms[kid] = "ES256"
            default:
                continue
            }
        }
        guard !algorithms.isEmpty else {
            throw LoadError(description: "the JWKS file holds no RS256 or ES256 signing key")
        }
        self.algorithms = algorithms
        self.keys = keys
    }

    /// Checks the token's header before any key is touched: a known `kid`, and `alg` equal to the one
    /// algorithm of that key (RS256 or ES256). jwt-kit would otherwise fall back to a default key for
    /// an unknown `kid`.
    func checkHeader(of token: String) -> Bool {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Self.base64URLDecode(parts[0]),
            let header = try? JSONSerialization.jsonObject(with: headerBytes) as? [String: Any],
            let alg = header["alg"] as? String, Self.allowedAlgorithms.contains(alg),
            let kid = header["kid"] as? String, algorithms[kid] == alg,
            header["crit"] == nil
        else { return false }
        return true
    }

    static func base64URLDecode(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard !base64.contains("=") else { return nil }
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}
