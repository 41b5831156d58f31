import EscrowCrypto
import Foundation
import JWTKit
import Testing

@testable import EscrowHTTP

/// Apple tokens are split, decoded and parsed once (``AppleToken``), and their claims read from that one strict parse:
/// the rules JSONDecoder applied before (types, optional claims, Apple's string booleans) and the strict parser's
/// (no duplicate member), on tokens really signed with the test RSA key.
@Suite("Apple tokens: one strict parse")
struct AppleTokenTests {
    /// A token over exactly `payload` (its bytes, as given), signed RS256 with the test key.
    static func signed(payload: String, header: String? = nil) async throws -> String {
        let keys = AppleTestKeys.shared
        let headerText = header ?? #"{"alg":"RS256","kid":"\#(AppleTestKeys.rsaKid)"}"#
        let input = Base64URL.encode(Array(headerText.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
        let collection = JWTKeyCollection()
        await collection.add(
            rsa: keys.rsaPrivate,
            digestAlgorithm: .sha256,
            kid: JWKIdentifier(string: AppleTestKeys.rsaKid)
        )
        let signature = try await collection.getKey(for: JWKIdentifier(string: AppleTestKeys.rsaKid), alg: "RS256")
            .sign(Array(input.utf8))
        return input + "." + Base64URL.encode(signature)
    }

    static func payload(_ extra: String = "", aud: String = "\"\(AppleTestKeys.audience)\"") -> String {
        let now = Int(Date().timeIntervalSince1970)
        return #"{"iss":"https://appleid.apple.com","aud":\#(aud),"exp":\#(now + 600),"iat":\#(now),"#
            + #""sub":"000000.invalid.token.0001"\#(extra)}"#
    }

    static func verify(_ token: String) async -> Result<AppleIdentityClaims, AppleVerifier.Rejection> {
        do {
            let verifier = try await AppleTestKeys.shared.verifier()
            return .success(try await verifier.verifySignature(token))
        } catch let rejection as AppleVerifier.Rejection {
            return .failure(rejection)
        } catch {
            Issue.record("the test verifier could not be made: \(error)")
            return .failure(AppleVerifier.Rejection(reason: "setup"))
        }
    }

    @Test("claims read as JSONDecoder read them: Apple's string booleans, an audience array, null as absent")
    func claimsRead() async throws {
        let token = try await Self.signed(
            payload: Self.payload(
                #","email":"nobody@example.invalid","is_private_email":"true","real_user_status":2.0"#,
                aud: "[\"\(AppleTestKeys.audience)\"]"
            )
        )
        let claims = try await Self.verify(token).get()
        #expect(claims.sub.value == "000000.invalid.token.0001")
        #expect(claims.aud.value == [AppleTestKeys.audience])
        #expect(claims.email == "nobody@example.invalid")
        #expect(claims.is_private_email == true)
        #expect(claims.real_user_status == 2)

        let plain = try await Self.verify(
            try await Self.signed(payload: Self.payload(#","email":null,"is_private_email":false"#))
        ).get()
        #expect(plain.email == nil)
        #expect(plain.is_private_email == false)
    }

    @Test(
        "a claim of the wrong type, or a required one missing, is refused by name",
        arguments: [
            (#","is_private_email":"yes""#, "is_private_email"), (#","real_user_status":"2""#, "real_user_status"),
            (#","real_user_status":2.5"#, "real_user_status"), (#","email":7"#, "email"),
        ]
    )
    func wrongTypes(extra: String, claim: String) async throws {
        let token = try await Self.signed(payload: Self.payload(extra))
        guard case .failure(let rejection) = await Self.verify(token) else {
            Issue.record("a token with \(claim) of the wrong type verified")
            return
        }
        #expect(rejection.reason.contains(claim))
        let noSubject = Self.payload().replacingOccurrences(of: #","sub":"000000.invalid.token.0001""#, with: "")
        guard case .failure(let missing) = await Self.verify(try await Self.signed(payload: noSubject)) else {
            Issue.record("a token without sub verified")
            return
        }
        #expect(missing.reason.contains("sub"))
    }

    @Test("a duplicate claim, a crit header, a fourth part or a changed byte is refused before any claim is read")
    func malformed() async throws {
        let duplicate = try await Self.signed(payload: Self.payload(#","sub":"000000.invalid.token.0002""#))
        #expect(AppleToken(duplicate) == nil, "two subs: JSONDecoder would have let the last win")
        let crit = try await Self.signed(
            payload: Self.payload(),
            header: #"{"alg":"RS256","kid":"\#(AppleTestKeys.rsaKid)","crit":["exp"]}"#
        )
        #expect(AppleToken(crit) == nil)
        let good = try await Self.signed(payload: Self.payload())
        #expect(AppleToken(good) != nil)
        #expect(AppleToken(good + ".e30") == nil)
        _ = try await Self.verify(good).get()
        var tampered = Array(good.utf8)
        let middle = tampered.firstIndex(of: UInt8(ascii: "."))! + 5
        tampered[middle] = tampered[middle] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        guard case .failure(let rejection) = await Self.verify(String(decoding: tampered, as: UTF8.self)) else {
            Issue.record("a changed payload verified")
            return
        }
        #expect(rejection.reason == "signature did not verify" || rejection.reason.hasPrefix("not a compact JWS"))
    }
}
