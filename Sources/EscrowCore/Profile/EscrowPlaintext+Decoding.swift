public import EscrowCrypto
internal import Foundation

extension EscrowPlaintext {
    /// The only plaintext format version.
    static let formatVersion: Int64 = 1

    /// Decodes the canonical encoding (see ``EscrowPlaintext``) and validates the profile again.
    ///
    /// The bytes are parsed in place with ``StrictJSON`` (no copy of the buffer); the strings of the
    /// resulting profile are ordinary Swift strings.
    /// - Throws: ``ProfileValidationError``: `malformed_json`, `unknown_field`, `invalid_type`,
    ///   `missing_field`, or `invalid_value` (also for a `v` other than 1), never echoing a value.
    public static func decode(_ bytes: SecretBytes) throws(ProfileValidationError) -> EscrowPlaintext {
        let members = try bytes.withUnsafeBytes { buffer throws(ProfileValidationError) in
            try ProfileParser.topLevelMembers(buffer)
        }
        guard let version = members.first(where: { $0.key.utf8.elementsEqual("v".utf8) })?.value else {
            throw .missingField("v")
        }
        guard case .number(let versionText) = version, Int64(versionText) == formatVersion else {
            throw .invalidValue("v", "v must be 1, the only plaintext format version")
        }
        var userIdentifier: String?
        var fullName: PersonName?
        var email: String?
        var isPrivateEmail: Bool?
        var realUserStatus: RealUserStatus?
        var verified: Bool?
        var capturedAt: Int64?
        var emailForwarding: Bool?
        var emailVerified: Bool?
        var transferSub: String?
        for member in members {
            switch PlaintextKey(exactly: member.key) {
            case .v: break
            case .userIdentifier: userIdentifier = try ProfileParser.string(member.value, field: "userIdentifier")
            case .fullName: fullName = try ProfileParser.personName(member.value, field: "fullName")
            case .email: email = try ProfileParser.string(member.value, field: "email")
            case .isPrivateEmail: isPrivateEmail = try ProfileParser.bool(member.value, field: "isPrivateEmail")
            case .realUserStatus:
                realUserStatus = try ProfileParser.realUserStatus(member.value, field: "realUserStatus")
            case .verified: verified = try ProfileParser.bool(member.value, field: "verified")
            case .capturedAt: capturedAt = try integer(member.value, field: "capturedAt")
            case .emailForwarding: emailForwarding = try ProfileParser.bool(member.value, field: "emailForwarding")
            case .emailVerified: emailVerified = try ProfileParser.bool(member.value, field: "emailVerified")
            case .transferSub: transferSub = try ProfileParser.string(member.value, field: "transferSub")
            case nil: throw .unknownField(StrictJSON.displayName(forKey: member.key))
            }
        }
        guard let userIdentifier else { throw .missingField("userIdentifier") }
        guard let isPrivateEmail else { throw .missingField("isPrivateEmail") }
        guard let verified else { throw .missingField("verified") }
        guard let capturedAt else { throw .missingField("capturedAt") }
        let profile = try Profile(
            userIdentifier: userIdentifier,
            fullName: fullName,
            email: email,
            isPrivateEmail: isPrivateEmail,
            realUserStatus: realUserStatus
        )
        return EscrowPlaintext(
            profile: profile,
            verified: verified,
            capturedAt: Date(timeIntervalSince1970: TimeInterval(capturedAt)),
            emailForwarding: emailForwarding,
            emailVerified: emailVerified,
            transferSub: transferSub
        )
    }

    private static func integer(_ value: StrictJSON.Value, field: String) throws(ProfileValidationError) -> Int64 {
        guard case .number(let text) = value, let integer = Int64(text) else {
            throw .invalidType(field, expected: "an integer")
        }
        return integer
    }

    private enum PlaintextKey: String, CaseIterable {
        case v, userIdentifier, fullName, email, isPrivateEmail, realUserStatus, verified, capturedAt, emailForwarding,
            emailVerified, transferSub

        init?(exactly key: String) {
            guard let match = Self.allCases.first(where: { $0.rawValue.utf8.elementsEqual(key.utf8) }) else {
                return nil
            }
            self = match
        }
    }
}
