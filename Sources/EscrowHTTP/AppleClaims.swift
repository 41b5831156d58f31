import JWTKit

/// The claims of an Apple identity token that verified capture checks. Every check but the
/// signature is made by ``AppleVerifier`` itself, so `verify(using:)` does nothing.
struct AppleIdentityClaims: JWTPayload {
    let iss: IssuerClaim
    let aud: AudienceClaim
    let exp: ExpirationClaim
    let iat: IssuedAtClaim
    let sub: SubjectClaim
    let email: String?

    func verify(using _: some JWTAlgorithm) async throws {}
}

/// The claims of an Apple server-to-server notification. `events` is a JSON document in a string.
struct AppleNotificationClaims: JWTPayload {
    let iss: IssuerClaim
    let aud: AudienceClaim
    let iat: IssuedAtClaim
    let exp: ExpirationClaim?
    let jti: IDClaim
    let events: String

    func verify(using _: some JWTAlgorithm) async throws {}
}
