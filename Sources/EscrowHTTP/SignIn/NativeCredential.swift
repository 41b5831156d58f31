import EscrowCore

/// The body of `POST /v1/apple/native/capture`: an `ASAuthorizationAppleIDCredential`'s own fields, as the app got
/// them, with the secret of the attempt it started. Parsed strictly (no duplicate or unknown members, each of its
/// type; `null` is absent). The profile rules are applied later, with the token's claims: a name that breaks them is
/// answered as `profileRefused`, not as a malformed body. `user`, the credential's identifier, is accepted and
/// ignored: the user is the token's `sub`, never the app's word.
struct NativeCredential {
    let attempt: String
    let identityToken: String
    let authorizationCode: String?
    let fullName: PersonName?
    let email: String?
    let realUserStatus: RealUserStatus?

    private enum Member: String, CaseIterable {
        case attempt, identityToken, authorizationCode, fullName, email, realUserStatus, user
    }

    init(_ body: [UInt8]) throws(ProfileValidationError) {
        var attempt: String?
        var identityToken: String?
        var authorizationCode: String?
        var fullName: PersonName?
        var email: String?
        var realUserStatus: RealUserStatus?
        for member in try ProfileParser.topLevelMembers(body) {
            let key = member.key
            switch Member.allCases.first(where: { $0.rawValue.utf8.elementsEqual(key.utf8) }) {
            case .attempt: attempt = try ProfileParser.string(member.value, field: key)
            case .identityToken: identityToken = try ProfileParser.string(member.value, field: key)
            case .authorizationCode: authorizationCode = try ProfileParser.string(member.value, field: key)
            case .fullName: fullName = try ProfileParser.personName(member.value, field: key)
            case .email: email = try ProfileParser.string(member.value, field: key)
            case .realUserStatus: realUserStatus = try ProfileParser.realUserStatus(member.value, field: key)
            case .user: _ = try ProfileParser.string(member.value, field: key)
            case nil:
                throw ProfileValidationError(
                    code: .unknownField,
                    field: StrictJSON.displayName(forKey: key),
                    message: "\(StrictJSON.displayName(forKey: key)) is not a known field"
                )
            }
        }
        guard let attempt else { throw Self.missing("attempt") }
        guard let identityToken, !identityToken.isEmpty else { throw Self.missing("identityToken") }
        self.attempt = attempt
        self.identityToken = identityToken
        self.authorizationCode = authorizationCode.flatMap { $0.isEmpty ? nil : $0 }
        self.fullName = fullName
        self.email = email
        self.realUserStatus = realUserStatus
    }

    private static func missing(_ field: String) -> ProfileValidationError {
        ProfileValidationError(code: .missingField, field: field, message: "\(field) is required")
    }

    /// The profile to escrow, `sub` and the email taken from the verified token (whose email wins over the app's),
    /// or the rule it breaks; nothing for a returning user, whose credential has neither name nor email.
    func profile(_ identity: AppleSignInIdentity) -> (Profile?, String?) {
        guard fullName?.isEmpty == false || email != nil else { return (nil, nil) }
        do {
            let profile = try Profile(
                userIdentifier: identity.userIdentifier,
                fullName: fullName,
                email: identity.email ?? email,
                isPrivateEmail: identity.email == nil ? nil : identity.isPrivateEmail,
                realUserStatus: identity.realUserStatus.flatMap(AppleVerifier.realUserStatus) ?? realUserStatus
            )
            return (profile, nil)
        } catch {
            return (nil, error.code.rawValue)
        }
    }
}
