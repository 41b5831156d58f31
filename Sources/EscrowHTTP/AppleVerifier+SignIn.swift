import EscrowCrypto
import Foundation
import JWTKit

/// The claims of an id_token from the web flow: an identity token's, plus the `nonce` the attempt sent.
struct AppleSignInClaims: JWTPayload {
    let iss: IssuerClaim
    let aud: AudienceClaim
    let exp: ExpirationClaim
    let iat: IssuedAtClaim
    let sub: SubjectClaim
    let nonce: String?
    let email: String?
    let email_verified: AppleBoolean?
    let is_private_email: AppleBoolean?
    let real_user_status: Int?

    func verify(using _: some JWTAlgorithm) async throws {}
}

/// Who signed in, as a verified id_token says.
struct AppleSignInIdentity: Sendable {
    let userIdentifier: String
    let email: String?
    let emailVerified: Bool?
    let isPrivateEmail: Bool?
    let realUserStatus: Int?
}

extension AppleVerifier {
    /// Checks a web flow's id_token: signature, `iss`, `aud` exactly `clientID` (the Services ID: native bundle IDs
    /// are for the API's verified capture), `exp`, `iat`, and a `nonce` whose hash is the attempt's (nil checks all
    /// but the nonce: when the attempt cannot be read, whether the token was valid at that time).
    func verifySignInToken(
        _ token: String,
        clientID: String,
        nonceHash: [UInt8]?,
        now: Date
    ) async throws(Rejection) -> AppleSignInIdentity {
        let claims: AppleSignInClaims = try await verifySignature(token)
        guard claims.iss.value == Self.issuer else { throw Rejection(reason: "wrong issuer") }
        guard claims.aud.value == [clientID] else { throw Rejection(reason: "wrong audience") }
        guard claims.exp.value.timeIntervalSince(now) > -leeway else { throw Rejection(reason: "expired") }
        guard claims.iat.value.timeIntervalSince(now) <= leeway else { throw Rejection(reason: "issued in the future") }
        if let nonceHash {
            guard let nonce = claims.nonce, Hashing.constantTimeEqual(Hashing.blake2b256(Array(nonce.utf8)), nonceHash)
            else { throw Rejection(reason: "nonce does not match") }
        }
        if let code = claims.real_user_status, Self.realUserStatus(code) == nil {
            throw Rejection(reason: "real_user_status invalid")
        }
        return AppleSignInIdentity(
            userIdentifier: claims.sub.value,
            email: claims.email,
            emailVerified: claims.email_verified?.value,
            isPrivateEmail: claims.is_private_email?.value,
            realUserStatus: claims.real_user_status
        )
    }
}
