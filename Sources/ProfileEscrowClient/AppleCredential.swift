public import Foundation

/// What Apple answered an app's `ASAuthorizationAppleIDRequest` with: the fields of
/// `ASAuthorizationAppleIDCredential` the escrow needs. The name and email arrive on the first authorization only,
/// which is why the client keeps this until the escrow holds it.
///
/// Personal data and credentials: never log it, print it or put it in an error.
public struct AppleCredential: Sendable, Hashable, Codable {
    /// Apple's user identifier (the identity token's `sub`, which is what the escrow trusts).
    public var user: String
    /// The identity token (a JWT), as text.
    public var identityToken: String
    /// The authorization code, as text; short-lived, for the app's backend to exchange with Apple.
    public var authorizationCode: String?
    public var fullName: Name?
    /// The email Apple gave the app; the escrow trusts the token's own `email` over it.
    public var email: String?
    /// `unsupported`, `unknown` or `likelyReal`.
    public var realUserStatus: String?

    public init(
        user: String,
        identityToken: String,
        authorizationCode: String? = nil,
        fullName: Name? = nil,
        email: String? = nil,
        realUserStatus: String? = nil
    ) {
        self.user = user
        self.identityToken = identityToken
        self.authorizationCode = authorizationCode
        self.fullName = fullName
        self.email = email
        self.realUserStatus = realUserStatus
    }

    /// The components of `PersonNameComponents` Apple fills.
    public struct Name: Sendable, Hashable, Codable {
        public var givenName: String?
        public var familyName: String?
        public var middleName: String?
        public var namePrefix: String?
        public var nameSuffix: String?
        public var nickname: String?

        public init(
            givenName: String? = nil,
            familyName: String? = nil,
            middleName: String? = nil,
            namePrefix: String? = nil,
            nameSuffix: String? = nil,
            nickname: String? = nil
        ) {
            self.givenName = givenName
            self.familyName = familyName
            self.middleName = middleName
            self.namePrefix = namePrefix
            self.nameSuffix = nameSuffix
            self.nickname = nickname
        }

        /// Whether no component is set (Apple's answer to a returning user, or a user who shared no name).
        var isEmpty: Bool {
            [givenName, familyName, middleName, namePrefix, nameSuffix, nickname].allSatisfy { $0 == nil }
        }
    }
}

extension AppleCredential.Name {
    /// The components Apple fills of a `PersonNameComponents` (`ASAuthorizationAppleIDCredential.fullName`).
    public init(_ components: PersonNameComponents) {
        self.init(
            givenName: components.givenName,
            familyName: components.familyName,
            middleName: components.middleName,
            namePrefix: components.namePrefix,
            nameSuffix: components.nameSuffix,
            nickname: components.nickname
        )
    }
}
