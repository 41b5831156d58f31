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

    /// Whether `token` may be checked with these keys, before any key is touched: its `kid` is known and its `alg` is
    /// the one algorithm of that key (RS256 or ES256). jwt-kit would otherwise fall back to a default key for an unknown
    /// `kid`.
    package func accepts(_ token: AppleToken) -> Bool {
        Self.allowedAlgorithms.contains(token.alg) && algorithms[token.kid] == token.alg
    }

    /// Unpadded base64url (RFC 7515), strictly: any other byte, padding, or an impossible length is nil. On the UTF-8
    /// bytes: Foundation's string replacing measured 3% of a sign-in callback's CPU.
    static func base64URLDecode(_ text: some Collection<UInt8>) -> [UInt8]? {
        var output: [UInt8] = []
        output.reserveCapacity(text.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in text {
            let value: UInt8
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0") + 52
            case UInt8(ascii: "-"): value = 62
            case UInt8(ascii: "_"): value = 63
            default: return nil
            }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // A length of 4n+1 characters cannot be base64; leftover bits must be zero (one encoding per value).
        guard bits < 6, accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return output
    }
}
