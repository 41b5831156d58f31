/// The one-time Sign in with Apple profile that ProfileEscrow holds.
///
/// A `Profile` exists only in validated, normalized form: its initializer enforces every profile rule.
/// It never shows its contents in `description`, `debugDescription`, string interpolation, `dump` or a
/// `Mirror`, so a profile that reaches a log by accident prints `Profile(redacted)`.
public struct Profile: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Apple's stable user identifier (`sub`): 1–255 bytes of `[0-9A-Za-z._-]`.
    public let userIdentifier: String
    /// The name components, NFC-normalized and trimmed; `nil` when every component is absent.
    public let fullName: PersonName?
    /// The email, as given (not normalized).
    public let email: String?
    /// Whether the email is an Apple private relay address.
    public let isPrivateEmail: Bool
    /// Apple's real-user indicator.
    public let realUserStatus: RealUserStatus?

    /// Validates and normalizes a profile.
    ///
    /// - Name components are NFC-normalized and trimmed of leading and trailing whitespace; a component
    ///   that is then empty is absent, and a `fullName` whose components are all absent becomes `nil`.
    /// - `isPrivateEmail` defaults to whether the email's domain is `privaterelay.appleid.com`
    ///   (ASCII case-insensitive), and to `false` without an email.
    /// - Throws: ``ProfileValidationError`` naming the field and the rule; the value is never echoed.
    public init(
        userIdentifier: String,
        fullName: PersonName?,
        email: String?,
        isPrivateEmail: Bool? = nil,
        realUserStatus: RealUserStatus?
    ) throws(ProfileValidationError) {
        try UserIdentifier.validate(userIdentifier)
        let name = try fullName.flatMap { name throws(ProfileValidationError) in try Self.normalizedName(name) }
        let email = try Self.validatedEmail(email)
        let resolvedPrivate: Bool
        if let isPrivateEmail {
            if isPrivateEmail && email == nil {
                throw .invalidValue("isPrivateEmail", "isPrivateEmail can be true only when an email is present")
            }
            resolvedPrivate = isPrivateEmail
        } else {
            resolvedPrivate = email.map(Self.isPrivateRelay) ?? false
        }
        guard name != nil || email != nil else {
            throw ProfileValidationError(
                code: .nothingToEscrow,
                field: nil,
                message: "at least one name component or an email must be present"
            )
        }
        self.userIdentifier = userIdentifier
        self.fullName = name
        self.email = email
        self.isPrivateEmail = resolvedPrivate
        self.realUserStatus = realUserStatus
    }

    public var description: String { "Profile(redacted)" }
    public var debugDescription: String { "Profile(redacted)" }
    public var customMirror: Mirror { Mirror(self, children: EmptyCollection<Mirror.Child>()) }
}
