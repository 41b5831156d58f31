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
    let keys: JWTKeyCollection

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
        self.algorithms = algorithms
        self.keys = keys
    }

    /// Checks the token's header before any key is touched: a known `kid`, and `alg` equal to the one
    /// algorithm of that key (RS256 or ES256). jwt-kit would otherwise fall back to a default key for
    /// an unknown `kid`. Header and payload must also be strict JSON (no duplicate claim, the profile rules'
    /// parser): jwt-kit's own decoder would let the last of two `sub`s win.
    package func checkHeader(of token: String) -> Bool {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Self.base64URLDecode(parts[0]),
            let header = try? StrictJSON.parse(headerBytes),
            let alg = header["alg"]?.stringValue, Self.allowedAlgorithms.contains(alg),
            let kid = header["kid"]?.stringValue, algorithms[kid] == alg,
            header["crit"] == nil,
            let payloadBytes = Self.base64URLDecode(parts[1]), (try? StrictJSON.parse(payloadBytes)) != nil
        else { return false }
        return true
    }

    /// The `kid` a token's header names, if it is readable (nothing else is checked here).
    static func kid(of token: String) -> String? {
        guard let end = token.utf8.firstIndex(of: UInt8(ascii: ".")),
            let header = base64URLDecode(Substring(token[..<end])), let json = try? StrictJSON.parse(header)
        else { return nil }
        return json["kid"]?.stringValue
    }

    static func base64URLDecode(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard !base64.contains("=") else { return nil }
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}
