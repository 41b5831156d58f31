import EscrowCore
import Foundation
import JWTKit

/// The keys of an Apple JWKS file (`https://appleid.apple.com/auth/keys`, saved by the operator),
/// restricted to the algorithms this service accepts: RS256 (RSA keys) and ES256 (EC P-256 keys).
///
/// Each key is bound to exactly one algorithm here, so the token's `alg` header can never make a key
/// be used with another algorithm (HS256 with an RSA public key as the HMAC secret, `none`, PS256).
package struct AppleJWKS: Sendable {
    /// kid → the one algorithm its key is used with.
    let algorithms: [String: String]
    /// kid → jwt-kit's verifier of its key, taken from the key collection once: a token's check then needs no hop
    /// to the collection's actor.
    let verifiers: [String: any JWTAlgorithm]

    static let allowedAlgorithms: Set<String> = ["RS256", "ES256"]

    struct LoadError: Error, CustomStringConvertible {
        let description: String
    }

    package init(json: [UInt8]) async throws {
        let document: StrictJSON.Value
        do {
            document = try StrictJSON.parse(json)
        } catch {
            throw LoadError(description: "the JWKS is not strict JSON (\(error.message))")
        }
        guard let entries = document["keys"]?.arrayValue else {
            throw LoadError(description: "the JWKS is not a JSON object with a keys array")
        }
        let keys = JWTKeyCollection()
        var algorithms: [String: String] = [:]
        for entry in entries {
            guard let kid = entry["kid"]?.stringValue, !kid.isEmpty else { continue }
            if let use = entry["use"], use.stringValue != "sig" { continue }
            let declared = entry["alg"]?.stringValue
            switch entry["kty"]?.stringValue {
            case "RSA":
                guard declared == nil || declared == "RS256", let n = entry["n"]?.stringValue,
                    let e = entry["e"]?.stringValue
                else { continue }
                let key: Insecure.RSA.PublicKey
                do {
                    key = try Insecure.RSA.PublicKey(modulus: n, exponent: e)
                } catch {
                    throw LoadError(description: "the JWKS's RSA key \(kid) is not a valid public key (\(error))")
                }
                await keys.add(rsa: key, digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
                algorithms[kid] = "RS256"
            case "EC":
                guard declared == nil || declared == "ES256", entry["crv"]?.stringValue == "P-256",
                    let x = entry["x"]?.stringValue, let y = entry["y"]?.stringValue
                else { continue }
                let key: ES256PublicKey
                do {
                    key = try ES256PublicKey(parameters: (x, y))
                } catch {
                    throw LoadError(
                        description: "the JWKS's EC key \(kid) is not a valid P-256 public key (\(error))"
                    )
                }
                await keys.add(ecdsa: key, kid: JWKIdentifier(string: kid))
                algorithms[kid] = "ES256"
            default:
                continue
            }
        }
        guard !algorithms.isEmpty else {
            throw LoadError(description: "the JWKS holds no RS256 or ES256 signing key")
        }
        var verifiers: [String: any JWTAlgorithm] = [:]
        for (kid, algorithm) in algorithms {
            guard let verifier = try? await keys.getKey(for: JWKIdentifier(string: kid), alg: algorithm) else {
                throw LoadError(description: "the JWKS's key \(kid) cannot verify \(algorithm)")
            }
            verifiers[kid] = verifier
        }
        self.algorithms = algorithms
        self.verifiers = verifiers
    }

    /// Whether `token` may be checked with these keys, before any key is touched: its `kid` is known and its `alg` is
    /// the one algorithm of that key (RS256 or ES256). jwt-kit would otherwise fall back to a default key for an unknown
    /// `kid`.
    package func accepts(_ token: AppleToken) -> Bool {
        Self.allowedAlgorithms.contains(token.alg) && algorithms[token.kid] == token.alg
    }

    /// Whether the token's signature verifies with the key its `kid` names (call ``accepts(_:)`` first).
    func verifiesSignature(of token: AppleToken) -> Bool {
        guard let verifier = verifiers[token.kid], verifier.name == token.alg else { return false }
        return (try? verifier.verify(token.signature, signs: token.signingInput)) == true
    }
}
