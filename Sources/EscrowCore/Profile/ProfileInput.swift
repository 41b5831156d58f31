/// A parsed profile input: the validated profile and, when given, the Apple identity token that
/// verified capture checks and the authorization code Apple gave beside it. Redacted in `description`,
/// `debugDescription` and `dump`.
public struct ProfileInput: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The validated, normalized profile.
    public let profile: Profile
    /// The Apple identity token (a JWT) as given, not yet verified.
    public let identityToken: String?
    /// `isPrivateEmail` as the body gave it (nil when absent: the profile derived it from the domain).
    public let statedIsPrivateEmail: Bool?
    /// Apple's authorization code of the same sign-in, as given: accepted only on a verified capture, which redeems it
    /// for the refresh token when the exchange is configured (never stored otherwise).
    public let authorizationCode: String?

    public init(
        profile: Profile,
        identityToken: String?,
        statedIsPrivateEmail: Bool? = nil,
        authorizationCode: String? = nil
    ) {
        self.profile = profile
        self.identityToken = identityToken
        self.statedIsPrivateEmail = statedIsPrivateEmail
        self.authorizationCode = authorizationCode
    }

    /// Refuses an ``authorizationCode`` given to a capture that verifies no identity token (the library's and the
    /// command line's, or a service without Apple's keys): nothing ties the code to the user, and it would go
    /// unredeemed while its sender believed it taken care of.
    public func requireNoAuthorizationCode() throws(ProfileValidationError) {
        guard authorizationCode != nil else { return }
        throw ProfileValidationError(
            code: .needsVerifiedCapture,
            field: "authorizationCode",
            message: "authorizationCode is accepted only by a verified capture (with a verified identityToken)"
        )
    }

    public var description: String { "ProfileInput(redacted)" }
    public var debugDescription: String { "ProfileInput(redacted)" }
    public var customMirror: Mirror { Mirror(self, children: EmptyCollection<Mirror.Child>()) }
}
