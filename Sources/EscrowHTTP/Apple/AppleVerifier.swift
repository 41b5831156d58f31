import EscrowCore
import Foundation
import JWTKit

/// Verifies Apple identity tokens (verified capture) and server-to-server notifications against
/// Apple's keys (a JWKS file, or fetched from a URL by ``AppleKeyFetcher``) and the configured audiences: the key chosen by `kid`, algorithms RS256 and
/// ES256 only, `iss` `https://appleid.apple.com`, `aud`, `exp`, `iat`; for identity tokens also `sub`
/// and `email`. jwt-kit's Apple helper checks neither the audience nor the algorithm: both are
/// checked here.
public final class AppleVerifier: Sendable {
    public static let issuer = "https://appleid.apple.com"

    /// The client ids (bundle id, services id) an Apple token may be issued to.
    public let audiences: Set<String>
    let keys: Keys
    /// Allowed clock skew for `exp` and `iat`, in seconds.
    let leeway: Double = 60

    /// Why a token was refused: logged (never the token or a claim's value), answered as one generic 401.
    struct Rejection: Error, CustomStringConvertible {
        let reason: String
        var description: String { "Apple token rejected: \(reason)" }
    }

    /// Where the keys come from.
    enum Keys: Sendable {
        /// A JWKS file's, read once.
        case fixed(AppleJWKS)
        /// Fetched from a URL, cached and refreshed.
        case fetched(AppleKeyFetcher)
    }

    public init(jwksJSON: [UInt8], audiences: Set<String>) async throws {
        precondition(!audiences.isEmpty, "at least one audience")
        self.keys = .fixed(try await AppleJWKS(json: jwksJSON))
        self.audiences = audiences
    }

    /// Keys fetched by `fetcher` (see ``AppleKeyFetcher``): call its `refresh()` at start to fetch before the first
    /// token.
    public init(fetcher: AppleKeyFetcher, audiences: Set<String>) {
        precondition(!audiences.isEmpty, "at least one audience")
        self.keys = .fetched(fetcher)
        self.audiences = audiences
    }

    /// Loads the JWKS file at `path`.
    public static func load(jwksPath path: String, audiences: Set<String>) async throws -> AppleVerifier {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw AppleJWKS.LoadError(description: "cannot read the JWKS file \(path)")
        }
        return try await AppleVerifier(jwksJSON: [UInt8](data), audiences: audiences)
    }

    /// What a verified capture's identity token gave.
    struct VerifiedCapture {
        /// The body's profile, with `realUserStatus` and `isPrivateEmail` taken from the token when it has them.
        let profile: Profile
        /// Whether Apple signed the profile's email (the token has one); false for an email only the body gave, nil
        /// without one.
        let emailVerified: Bool?
        /// The client the token was issued to (its one `aud`: an app's bundle ID, a Services ID); nil when it names
        /// several.
        let audience: String?
        /// The token's `c_hash`, for the body's `authorizationCode` (``checkCodeHash(_:code:)``).
        let codeHash: String?
    }

    /// Checks an identity token for `input` and returns the profile to capture. The token's email, when both have
    /// one, must be the profile's (ASCII case-insensitive); a `realUserStatus` or an `isPrivateEmail` that the body
    /// states and the token contradicts is a mismatch too.
    func verifyIdentityToken(
        _ token: String,
        for input: ProfileInput,
        now: Date
    ) async throws(Rejection) -> VerifiedCapture {
        let profile = input.profile
        let claims: AppleIdentityClaims = try await verifySignature(token)
        try checkIssuerAndAudience(claims.iss, claims.aud)
        guard claims.exp.value.timeIntervalSince(now) > -leeway else { throw Rejection(reason: "expired") }
        guard claims.iat.value.timeIntervalSince(now) <= leeway else { throw Rejection(reason: "issued in the future") }
        guard claims.sub.value.utf8.elementsEqual(profile.userIdentifier.utf8) else {
            throw Rejection(reason: "sub does not match userIdentifier")
        }
        if let tokenEmail = claims.email, let email = profile.email, !Self.asciiCaseInsensitiveEqual(tokenEmail, email)
        {
            throw Rejection(reason: "email does not match")
        }
        var realUserStatus = profile.realUserStatus
        if let code = claims.real_user_status {
            guard let status = Self.realUserStatus(code) else { throw Rejection(reason: "real_user_status invalid") }
            if let stated = realUserStatus, stated != status {
                throw Rejection(reason: "realUserStatus does not match")
            }
            realUserStatus = status
        }
        var isPrivateEmail = input.statedIsPrivateEmail
        // Only an email can be private: without one in the profile, the token's flag qualifies nothing.
        if let flag = claims.is_private_email, profile.email != nil {
            if let stated = isPrivateEmail, stated != flag {
                throw Rejection(reason: "isPrivateEmail does not match")
            }
            isPrivateEmail = flag
        }
        do {
            let verified = try Profile(
                userIdentifier: profile.userIdentifier,
                fullName: profile.fullName,
                email: profile.email,
                isPrivateEmail: isPrivateEmail,
                realUserStatus: realUserStatus
            )
            return VerifiedCapture(
                profile: verified,
                emailVerified: verified.email == nil ? nil : claims.email != nil,
                audience: claims.aud.value.count == 1 ? claims.aud.value[0] : nil,
                codeHash: claims.c_hash
            )
        } catch {
            throw Rejection(reason: "the token's claims do not fit the profile")
        }
    }

    /// Apple's `real_user_status`: 0 unsupported, 1 unknown, 2 likely real.
    static func realUserStatus(_ code: Int) -> RealUserStatus? {
        switch code {
        case 0: .unsupported
        case 1: .unknown
        case 2: .likelyReal
        default: nil
        }
    }

    /// Byte equality with only `A`–`Z` folded: `lowercased()` applies full Unicode case mapping, so the
    /// Kelvin sign (U+212A) would match a `k` in the token.
    static func asciiCaseInsensitiveEqual(_ a: String, _ b: String) -> Bool {
        func fold(_ byte: UInt8) -> UInt8 { (65...90).contains(byte) ? byte | 0x20 : byte }
        return a.utf8.count == b.utf8.count && zip(a.utf8, b.utf8).allSatisfy { fold($0) == fold($1) }
    }

    /// Checks a notification's signature and claims and returns them.
    func verifyNotification(_ jws: String, now: Date) async throws(Rejection) -> AppleNotificationClaims {
        let claims: AppleNotificationClaims = try await verifySignature(jws)
        try checkIssuerAndAudience(claims.iss, claims.aud)
        if let exp = claims.exp, exp.value.timeIntervalSince(now) <= -leeway { throw Rejection(reason: "expired") }
        guard claims.iat.value.timeIntervalSince(now) <= leeway else { throw Rejection(reason: "issued in the future") }
        guard !claims.jti.value.isEmpty else { throw Rejection(reason: "no jti") }
        return claims
    }

    func verifySignature<Claims: AppleTokenClaims>(_ token: String) async throws(Rejection) -> Claims {
        guard token.utf8.count <= 8 * 1024 else { throw Rejection(reason: "larger than 8 KiB") }
        guard let parsed = AppleToken(token) else {
            throw Rejection(reason: "not a compact JWS with a strict JSON header and payload")
        }
        let jwks: AppleJWKS
        switch keys {
        case .fixed(let fixed): jwks = fixed
        case .fetched(let fetcher):
            guard let fetched = await fetcher.keys(forKID: parsed.kid) else {
                throw Rejection(reason: "Apple's keys could not be fetched")
            }
            jwks = fetched
        }
        guard jwks.accepts(parsed) else {
            throw Rejection(reason: "header: unknown kid or algorithm not allowed")
        }
        guard jwks.verifiesSignature(of: parsed) else { throw Rejection(reason: "signature did not verify") }
        do {
            return try Claims(AppleClaimReader(parsed.payload))
        } catch {
            throw Rejection(reason: "claim \(error.claim) missing or of the wrong type")
        }
    }

    private func checkIssuerAndAudience(_ iss: IssuerClaim, _ aud: AudienceClaim) throws(Rejection) {
        guard iss.value == Self.issuer else { throw Rejection(reason: "wrong issuer") }
        guard !aud.value.isEmpty, aud.value.allSatisfy(audiences.contains) else {
            throw Rejection(reason: "wrong audience")
        }
    }
}
