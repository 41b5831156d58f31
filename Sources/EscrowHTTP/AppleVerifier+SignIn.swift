import EscrowCrypto
import Foundation
import JWTKit

/// The claims of an id_token from the web flow: an identity token's, plus the `nonce` the attempt sent and
/// `email_verified`.
struct AppleSignInClaims: AppleTokenClaims {
    let identity: AppleIdentityClaims
    let nonce: String?
    let email_verified: Bool?

    init(_ claims: AppleClaimReader) throws(AppleClaimError) {
        identity = try AppleIdentityClaims(claims)
        nonce = try claims.string("nonce")
        email_verified = try claims.boolean("email_verified")
    }
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
        let signIn: AppleSignInClaims = try await verifySignature(token)
        let claims = signIn.identity
        guard claims.iss.value == Self.issuer else { throw Rejection(reason: "wrong issuer") }
        guard claims.aud.value == [clientID] else { throw Rejection(reason: "wrong audience") }
        guard claims.exp.value.timeIntervalSince(now) > -leeway else { throw Rejection(reason: "expired") }
        guard claims.iat.value.timeIntervalSince(now) <= leeway else { throw Rejection(reason: "issued in the future") }
        if let nonceHash {
            guard let nonce = signIn.nonce,
                Hashing.constantTimeEqual(Hashing.blake2b256(Array(nonce.utf8)), nonceHash)
            else { throw Rejection(reason: "nonce does not match") }
        }
        if let code = claims.real_user_status, Self.realUserStatus(code) == nil {
            throw Rejection(reason: "real_user_status invalid")
        }
        return AppleSignInIdentity(
            userIdentifier: claims.sub.value,
            email: claims.email,
            emailVerified: signIn.email_verified,
            isPrivateEmail: claims.is_private_email,
            realUserStatus: claims.real_user_status
        )
    }
}
