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
    /// Apple sends `"true"`/`"false"` strings; a JSON boolean is accepted too.
    let is_private_email: AppleBoolean?
    /// 0 unsupported, 1 unknown, 2 likely real.
    let real_user_status: Int?

    func verify(using _: some JWTAlgorithm) async throws {}
}

/// A boolean claim that Apple may send as a JSON boolean or as the string `"true"` / `"false"`.
struct AppleBoolean: Codable, Sendable, Equatable {
    let value: Bool

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let flag = try? container.decode(Bool.self) {
            value = flag
            return
        }
        switch try container.decode(String.self) {
        case "true": value = true
        case "false": value = false
        default: throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a boolean")
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(value)
    }
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
