import JWTKit

/// The claims of an Apple identity token that verified capture checks. Every check but the
/// signature is made by ``AppleVerifier`` itself.
struct AppleIdentityClaims: AppleTokenClaims {
    let iss: IssuerClaim
    let aud: AudienceClaim
    let exp: ExpirationClaim
    let iat: IssuedAtClaim
    let sub: SubjectClaim
    let email: String?
    /// Apple sends `"true"`/`"false"` strings; a JSON boolean is accepted too.
    let is_private_email: Bool?
    /// 0 unsupported, 1 unknown, 2 likely real.
    let real_user_status: Int?
    /// The hash of the authorization code issued with the token (``AppleVerifier/checkCodeHash(_:code:)``).
    let c_hash: String?

    init(_ claims: AppleClaimReader) throws(AppleClaimError) {
        iss = try claims.issuer()
        aud = try claims.audience()
        exp = ExpirationClaim(value: try claims.requiredDate("exp"))
        iat = IssuedAtClaim(value: try claims.requiredDate("iat"))
        sub = SubjectClaim(value: try claims.required("sub"))
        email = try claims.string("email")
        is_private_email = try claims.boolean("is_private_email")
        real_user_status = try claims.integer("real_user_status")
        c_hash = try claims.string("c_hash")
    }
}

/// The claims of an Apple server-to-server notification. `events` is a JSON document in a string.
struct AppleNotificationClaims: AppleTokenClaims {
    let iss: IssuerClaim
    let aud: AudienceClaim
    let iat: IssuedAtClaim
    let exp: ExpirationClaim?
    let jti: IDClaim
    let events: String

    init(_ claims: AppleClaimReader) throws(AppleClaimError) {
        iss = try claims.issuer()
        aud = try claims.audience()
        iat = IssuedAtClaim(value: try claims.requiredDate("iat"))
        exp = try claims.date("exp").map { ExpirationClaim(value: $0) }
        jti = IDClaim(value: try claims.required("jti"))
        events = try claims.required("events")
    }
}
