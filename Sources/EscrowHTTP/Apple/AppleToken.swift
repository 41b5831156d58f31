import EscrowCore
import EscrowCrypto
import Foundation
import JWTKit

/// An Apple JWS (identity token or notification) split and decoded once, strictly: three base64url parts, a header
/// and a payload that are strict JSON objects (no duplicate member: JSONDecoder would let the last of two `sub`s
/// win), a string `kid` and `alg`, and no `crit`. Nothing is verified yet: ``AppleVerifier/verifySignature(_:)``
/// checks the signature over ``signingInput`` with the key the `kid` names, then reads the claims from ``payload``.
///
/// jwt-kit keeps the keys and checks the signature (`JWTKeyCollection.getKey(for:alg:)`); the claims are read from
/// the one strict parse instead of being decoded again with Foundation's JSONDecoder, which measured about a tenth
/// of a web sign-in callback's CPU (header and payload were parsed four times in all).
package struct AppleToken: Sendable {
    let kid: String
    let alg: String
    /// `header.payload` as sent: the bytes the signature covers.
    let signingInput: ArraySlice<UInt8>
    let signature: [UInt8]
    let payload: [StrictJSON.Member]

    package init?(_ token: String) {
        let bytes = Array(token.utf8)
        guard let first = bytes.firstIndex(of: UInt8(ascii: ".")),
            let second = bytes[(first + 1)...].firstIndex(of: UInt8(ascii: ".")),
            !bytes[(second + 1)...].contains(UInt8(ascii: ".")),
            let headerBytes = Base64URL.decode(bytes[..<first]),
            case .object(let header)? = try? StrictJSON.parse(headerBytes),
            let payloadBytes = Base64URL.decode(bytes[(first + 1)..<second]),
            case .object(let payload)? = try? StrictJSON.parse(payloadBytes),
            let signature = Base64URL.decode(bytes[(second + 1)...])
        else { return nil }
        let members = StrictJSON.Value.object(header)
        guard let kid = members["kid"]?.stringValue, let alg = members["alg"]?.stringValue, members["crit"] == nil
        else { return nil }
        self.kid = kid
        self.alg = alg
        self.signingInput = bytes[..<second]
        self.signature = signature
        self.payload = payload
    }
}

/// Claims read from a verified ``AppleToken``'s payload. A claim of the wrong type, or a required one missing, is
/// ``AppleClaimError``; unknown claims are ignored.
protocol AppleTokenClaims {
    init(_ claims: AppleClaimReader) throws(AppleClaimError)
}

/// The claim that did not read (its name only: never its value).
struct AppleClaimError: Error {
    let claim: String
}

/// Typed reads of a payload's members, with jwt-kit's claim types and JSONDecoder's rules for them: a NumericDate
/// is a JSON number of seconds since 1970, `aud` a string or an array of strings, a JSON `null` is absent.
struct AppleClaimReader {
    private let members: [String: StrictJSON.Value]

    init(_ payload: [StrictJSON.Member]) {
        // Strict JSON has no duplicate member, so the keys are unique.
        members = Dictionary(payload.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    private func value(_ name: String) -> StrictJSON.Value? {
        guard let value = members[name], value != .null else { return nil }
        return value
    }

    func string(_ name: String) throws(AppleClaimError) -> String? {
        guard let value = value(name) else { return nil }
        guard let text = value.stringValue else { throw AppleClaimError(claim: name) }
        return text
    }

    func required(_ name: String) throws(AppleClaimError) -> String {
        guard let text = try string(name) else { throw AppleClaimError(claim: name) }
        return text
    }

    func date(_ name: String) throws(AppleClaimError) -> Date? {
        guard let value = value(name) else { return nil }
        guard case .number(let text) = value, let seconds = Double(text), seconds.isFinite else {
            throw AppleClaimError(claim: name)
        }
        return Date(timeIntervalSince1970: seconds)
    }

    func requiredDate(_ name: String) throws(AppleClaimError) -> Date {
        guard let date = try date(name) else { throw AppleClaimError(claim: name) }
        return date
    }

    func integer(_ name: String) throws(AppleClaimError) -> Int? {
        guard let value = value(name) else { return nil }
        guard case .number(let text) = value,
            let number = Int(text) ?? Double(text).flatMap({ Int(exactly: $0) })
        else { throw AppleClaimError(claim: name) }
        return number
    }

    /// Apple sends `"true"`/`"false"` strings; a JSON boolean is accepted too.
    func boolean(_ name: String) throws(AppleClaimError) -> Bool? {
        switch value(name) {
        case nil: return nil
        case .bool(let flag): return flag
        case .string("true"): return true
        case .string("false"): return false
        default: throw AppleClaimError(claim: name)
        }
    }

    func issuer() throws(AppleClaimError) -> IssuerClaim { IssuerClaim(value: try required("iss")) }

    func audience() throws(AppleClaimError) -> AudienceClaim {
        switch value("aud") {
        case .string(let audience): return AudienceClaim(value: [audience])
        case .array(let elements):
            var audiences: [String] = []
            for element in elements {
                guard let audience = element.stringValue else { throw AppleClaimError(claim: "aud") }
                audiences.append(audience)
            }
            return AudienceClaim(value: audiences)
        default: throw AppleClaimError(claim: "aud")
        }
    }
}
