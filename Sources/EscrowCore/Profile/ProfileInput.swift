/// A parsed profile input: the validated profile and, when given, the Apple identity token that
/// verified capture checks. Redacted in `description`, `debugDescription` and `dump`.
public struct ProfileInput: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The validated, normalized profile.
    public let profile: Profile
    /// The Apple identity token (a JWT) as given, not yet verified.
    public let identityToken: String?
    /// `isPrivateEmail` as the body gave it (nil when absent: the profile derived it from the domain).
    public let statedIsPrivateEmail: Bool?

    public init(profile: Profile, identityToken: String?, statedIsPrivateEmail: Bool? = nil) {
        self.profile = profile
        self.identityToken = identityToken
        self.statedIsPrivateEmail = statedIsPrivateEmail
    }

    public var description: String { "ProfileInput(redacted)" }
    public var debugDescription: String { "ProfileInput(redacted)" }
    public var customMirror: Mirror { Mirror(self, children: EmptyCollection<Mirror.Child>()) }
}
