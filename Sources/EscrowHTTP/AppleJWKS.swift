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

    /// Unpadded base64url (RFC 7515), strictly: any other byte, padding, or an impossible length is nil, and so are
    /// leftover bits that are not zero (one encoding per value). Neither Foundation nor jwt-kit offers a strict
    /// base64url decoder in public; this one decodes four characters at a time through a table, on the UTF-8 bytes
    /// (a byte-at-a-time decoder measured 1% of a web sign-in callback's CPU, Foundation's string replacing 3%).
    static func base64URLDecode(_ text: some Collection<UInt8>) -> [UInt8]? {
        if let decoded = text.withContiguousStorageIfAvailable({ decode($0) }) { return decoded }
        return Array(text).withUnsafeBufferPointer { decode($0) }
    }

    /// Each byte's 6-bit value, or `invalid`.
    private static let values: [UInt8] = {
        var values = [UInt8](repeating: invalid, count: 256)
        for (value, byte) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8.enumerated() {
            values[Int(byte)] = UInt8(value)
        }
        return values
    }()
    private static let invalid: UInt8 = 0x80

    private static func decode(_ input: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        let remainder = input.count % 4
        guard remainder != 1 else { return nil }
        let outputCount = input.count / 4 * 3 + max(0, remainder - 1)
        var flags: UInt8 = 0
        let output = values.withUnsafeBufferPointer { table in
            [UInt8](unsafeUninitializedCapacity: outputCount) { buffer, initialized in
                func value(_ index: Int) -> UInt32 {
                    let value = table[Int(input[index])]
                    flags |= value
                    return UInt32(value)
                }
                var index = 0
                var out = 0
                while index + 4 <= input.count {
                    let group = value(index) << 18 | value(index + 1) << 12 | value(index + 2) << 6 | value(index + 3)
                    buffer[out] = UInt8(truncatingIfNeeded: group >> 16)
                    buffer[out + 1] = UInt8(truncatingIfNeeded: group >> 8)
                    buffer[out + 2] = UInt8(truncatingIfNeeded: group)
                    index += 4
                    out += 3
                }
                if remainder >= 2 {
                    let second = value(index + 1)
                    var group = value(index) << 18 | second << 12
                    buffer[out] = UInt8(truncatingIfNeeded: group >> 16)
                    if remainder == 3 {
                        let third = value(index + 2)
                        group |= third << 6
                        buffer[out + 1] = UInt8(truncatingIfNeeded: group >> 8)
                        if third & 0x03 != 0 { flags |= invalid }
                    } else if second & 0x0F != 0 {
                        flags |= invalid
                    }
                }
                initialized = outputCount
            }
        }
        return flags & invalid == 0 ? output : nil
    }
}
