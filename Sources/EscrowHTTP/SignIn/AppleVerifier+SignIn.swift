import EscrowCrypto
import Foundation
import JWTKit

/// The claims of a sign-in's id_token (the web flow's or an app's): an identity token's (its `c_hash` included), plus
/// the `nonce` the attempt sent, `email_verified` and `transfer_sub` (the user's identifier under the team that transferred the app, when Apple sends one).
struct AppleSignInClaims: AppleTokenClaims {
    let identity: AppleIdentityClaims
    let nonce: String?
    let email_verified: Bool?
    let transfer_sub: String?

    init(_ claims: AppleClaimReader) throws(AppleClaimError) {
        identity = try AppleIdentityClaims(claims)
        nonce = try claims.string("nonce")
        email_verified = try claims.boolean("email_verified")
        transfer_sub = try claims.string("transfer_sub")
    }
}

/// Who signed in, as a verified id_token says.
struct AppleSignInIdentity: Sendable {
    let userIdentifier: String
    /// The client the token was issued to (its one `aud`): the Services ID, or the app's bundle ID.
    let audience: String
    let email: String?
    let emailVerified: Bool?
    let isPrivateEmail: Bool?
    let realUserStatus: Int?
    /// Apple's `transfer_sub`: passed through to the app's backend, which matches it against its users of the team
    /// the app was transferred from.
    let transferSub: String?
}

extension AppleVerifier {
    /// Checks a sign-in's id_token: signature, `iss`, `aud` exactly one of `audiences` (the web flow's Services ID
    /// for Apple's callback, the native bundle IDs for an app's capture: never both), `exp`, `iat`, a `nonce` whose
    /// hash is `nonceHash` (nil checks all but the nonce: when the attempt cannot be read, whether the token was valid
    /// at that time), and, when the token has a `c_hash`, that it is the hash of `authorizationCode` (so a token
    /// cannot be paired with another user's code).
    func verifySignInToken(
        _ token: String,
        audiences: Set<String>,
        nonceHash: [UInt8]?,
        authorizationCode: String?,
        now: Date
    ) async throws(Rejection) -> AppleSignInIdentity {
        let signIn: AppleSignInClaims = try await verifySignature(token)
        let claims = signIn.identity
        guard claims.iss.value == Self.issuer else { throw Rejection(reason: "wrong issuer") }
        guard claims.aud.value.count == 1, audiences.contains(claims.aud.value[0]) else {
            throw Rejection(reason: "wrong audience")
        }
        guard claims.exp.value.timeIntervalSince(now) > -leeway else { throw Rejection(reason: "expired") }
        guard claims.iat.value.timeIntervalSince(now) <= leeway else { throw Rejection(reason: "issued in the future") }
        if let nonceHash {
            guard let nonce = signIn.nonce,
                Hashing.constantTimeEqual(Hashing.blake2b256(Array(nonce.utf8)), nonceHash)
            else { throw Rejection(reason: "nonce does not match") }
        }
        try Self.checkCodeHash(claims.c_hash, code: authorizationCode)
        if let code = claims.real_user_status, Self.realUserStatus(code) == nil {
            throw Rejection(reason: "real_user_status invalid")
        }
        return AppleSignInIdentity(
            userIdentifier: claims.sub.value,
            audience: claims.aud.value[0],
            email: claims.email,
            emailVerified: signIn.email_verified,
            isPrivateEmail: claims.is_private_email,
            realUserStatus: claims.real_user_status,
            transferSub: signIn.transfer_sub
        )
    }

    /// When the token has a `c_hash`, that it is the hash of `code`, so that a token cannot be paired with another
    /// user's code; a token with one and no code fails.
    static func checkCodeHash(_ cHash: String?, code: String?) throws(Rejection) {
        guard let cHash else { return }
        guard let code, codeHashMatches(cHash, code: code) else {
            throw Rejection(reason: "c_hash does not match the code")
        }
    }

    /// OpenID Connect's `c_hash`: the base64url of the left half of the SHA-256 of the code's ASCII bytes (the hash
    /// that goes with ES256 and RS256), compared in constant time.
    static func codeHashMatches(_ cHash: String, code: String) -> Bool {
        let expected = Base64URL.encode(Array(Hashing.sha256(Array(code.utf8)).prefix(16)))
        return Hashing.constantTimeEqual(Array(cHash.utf8), Array(expected.utf8))
    }
}
