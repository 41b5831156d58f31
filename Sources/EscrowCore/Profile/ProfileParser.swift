/// Parses the profile input JSON, the same for the library, the CLI and HTTP.
///
/// The body is parsed with ``StrictJSON`` (no duplicate keys, strict RFC 8259), must be an object with
/// only the members `userIdentifier`, `fullName` (`givenName`, `familyName`, `middleName`, `namePrefix`,
/// `nameSuffix`, `nickname`), `email`, `isPrivateEmail`, `realUserStatus`, `identityToken` and
/// `authorizationCode` (1–1,024 bytes of printable ASCII, OAuth's code characters), each of the right JSON type;
/// `null` is the same as absent. The profile is then validated and normalized by
/// ``Profile/init(userIdentifier:fullName:email:isPrivateEmail:realUserStatus:)``.
public enum ProfileParser {
    /// The largest accepted body: 16 KiB.
    public static let maximumBodySize = 16 * 1024

    /// Parses and validates a profile input body.
    ///
    /// - Throws: ``ProfileValidationError`` with the field path and a message that never echoes a value.
    /// - Parameter limit: the largest accepted body; ``maximumBodySize`` unless the operator configured
    ///   another (the HTTP server's `maximumBodySize`).
    public static func parse(
        _ body: some Collection<UInt8>,
        maximumBodySize limit: Int = ProfileParser.maximumBodySize
    ) throws(ProfileValidationError) -> ProfileInput {
        guard body.count <= limit else {
            throw ProfileValidationError(
                code: .bodyTooLarge,
                field: nil,
                message: "the body must be at most \(limit) bytes"
            )
        }
        let members = try topLevelMembers(body)
        var userIdentifier: String?
        var fullName: PersonName?
        var email: String?
        var isPrivateEmail: Bool?
        var realUserStatus: RealUserStatus?
        var identityToken: String?
        var authorizationCode: String?
        for member in members {
            switch InputKey(exactly: member.key) {
            case .userIdentifier: userIdentifier = try string(member.value, field: "userIdentifier")
            case .fullName: fullName = try personName(member.value, field: "fullName")
            case .email: email = try string(member.value, field: "email")
            case .isPrivateEmail: isPrivateEmail = try bool(member.value, field: "isPrivateEmail")
            case .realUserStatus: realUserStatus = try self.realUserStatus(member.value, field: "realUserStatus")
            case .identityToken: identityToken = try string(member.value, field: "identityToken")
            case .authorizationCode: authorizationCode = try self.authorizationCode(member.value)
            case nil: throw .unknownField(StrictJSON.displayName(forKey: member.key))
            }
        }
        guard let userIdentifier else { throw .missingField("userIdentifier") }
        let profile = try Profile(
            userIdentifier: userIdentifier,
            fullName: fullName,
            email: email,
            isPrivateEmail: isPrivateEmail,
            realUserStatus: realUserStatus
        )
        return ProfileInput(
            profile: profile,
            identityToken: identityToken,
            statedIsPrivateEmail: isPrivateEmail,
            authorizationCode: authorizationCode
        )
    }

    /// The longest authorization code accepted (Apple's are well under 100 bytes).
    public static let maximumAuthorizationCodeSize = 1024

    /// A string of 1–``maximumAuthorizationCodeSize`` bytes of `%x20-7E` (RFC 6749's code characters), or null.
    static func authorizationCode(_ value: StrictJSON.Value) throws(ProfileValidationError) -> String? {
        let field = "authorizationCode"
        guard let code = try string(value, field: field) else { return nil }
        guard !code.isEmpty, code.utf8.count <= maximumAuthorizationCodeSize else {
            throw .invalidValue(field, "\(field) must be 1 to \(maximumAuthorizationCodeSize) bytes")
        }
        guard code.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else {
            throw .invalidValue(field, "\(field) must be printable ASCII")
        }
        return code
    }

    private enum InputKey: String, CaseIterable {
        case userIdentifier, fullName, email, isPrivateEmail, realUserStatus, identityToken, authorizationCode

        /// Matches by exact bytes (Swift's `==` would also accept canonically equivalent spellings).
        init?(exactly key: String) {
            guard let match = Self.allCases.first(where: { $0.rawValue.utf8.elementsEqual(key.utf8) }) else {
                return nil
            }
            self = match
        }
    }
}

// Readers shared with `EscrowPlaintext.decode(_:)` and an app's native sign-in capture.
extension ProfileParser {
    /// Parses `body` with ``StrictJSON`` and returns the members of the top-level object.
    package static func topLevelMembers(_ body: some Collection<UInt8>) throws(ProfileValidationError) -> [StrictJSON.Member] {
        let document: StrictJSON.Value
        do {
            document = try StrictJSON.parse(body)
        } catch {
            throw malformed(error)
        }
        guard case .object(let members) = document else {
            throw .invalidType(nil, expected: "a JSON object")
        }
        return members
    }

    static func malformed(_ error: StrictJSONError) -> ProfileValidationError {
        ProfileValidationError(code: .malformedJSON, field: error.path, message: error.message)
    }

    package static func string(_ value: StrictJSON.Value, field: String) throws(ProfileValidationError) -> String? {
        switch value {
        case .null: return nil
        case .string(let string): return string
        default: throw .invalidType(field, expected: "a string or null")
        }
    }

    static func bool(_ value: StrictJSON.Value, field: String) throws(ProfileValidationError) -> Bool? {
        switch value {
        case .null: return nil
        case .bool(let bool): return bool
        default: throw .invalidType(field, expected: "a boolean or null")
        }
    }

    package static func realUserStatus(
        _ value: StrictJSON.Value,
        field: String
    ) throws(ProfileValidationError) -> RealUserStatus? {
        guard let raw = try string(value, field: field) else { return nil }
        guard let status = RealUserStatus.allCases.first(where: { $0.rawValue.utf8.elementsEqual(raw.utf8) }) else {
            throw .invalidValue(field, "\(field) must be one of unsupported, unknown, likelyReal")
        }
        return status
    }

    /// An object with only the six name members, each a string or null; or null.
    package static func personName(_ value: StrictJSON.Value, field: String) throws(ProfileValidationError) -> PersonName? {
        let members: [StrictJSON.Member]
        switch value {
        case .null: return nil
        case .object(let objectMembers): members = objectMembers
        default: throw .invalidType(field, expected: "an object or null")
        }
        var components = [String?](repeating: nil, count: PersonName.keys.count)
        for member in members {
            guard let index = PersonName.keys.firstIndex(where: { $0.utf8.elementsEqual(member.key.utf8) }) else {
                throw .unknownField(field + "." + StrictJSON.displayName(forKey: member.key))
            }
            components[index] = try string(member.value, field: field + "." + PersonName.keys[index])
        }
        return PersonName(components: components)
    }
}
