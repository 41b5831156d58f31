internal import Foundation

// The profile rules, one function per field. Messages name the field and the rule, never the value.
extension Profile {
    /// The longest name component, in UTF-8 bytes after NFC normalization.
    static let maximumNameComponentBytes = 256
    /// The longest email, in bytes (RFC 5321 path limit minus the angle brackets).
    static let maximumEmailBytes = 254
    /// The longest local part of an email, in bytes (RFC 5321).
    static let maximumEmailLocalPartBytes = 64
    /// The private relay domain; `isPrivateEmail` defaults to whether the email's domain is this one.
    static let privateRelayDomain = "privaterelay.appleid.com"

    /// Normalizes every component; `nil` when all of them are absent afterwards.
    static func normalizedName(_ name: PersonName) throws(ProfileValidationError) -> PersonName? {
        var components: [String?] = []
        for (key, component) in zip(PersonName.keys, name.components) {
            components.append(try normalizedNameComponent(component, field: "fullName." + key))
        }
        let normalized = PersonName(components: components)
        return normalized.isEmpty ? nil : normalized
    }

    /// One name component: no control or bidi characters, trimmed, whitespace-only is absent, NFC,
    /// at most 256 UTF-8 bytes after normalization.
    static func normalizedNameComponent(_ value: String?, field: String) throws(ProfileValidationError) -> String? {
        guard let value else { return nil }
        for scalar in value.unicodeScalars {
            if isControl(scalar) {
                throw .invalidValue(
                    field,
                    "\(field) must not contain control characters (C0, DEL, C1, CR/LF, U+2028, U+2029)"
                )
            }
            if isBidiControl(scalar) {
                throw .invalidValue(
                    field,
                    "\(field) must not contain bidirectional controls (U+202A–U+202E, U+2066–U+2069, "
                        + "U+200E, U+200F, U+061C)"
                )
            }
        }
        let trimmed = trimmingWhitespace(value)
        guard !trimmed.isEmpty else { return nil }
        // ASCII text is its own NFC form: only other text goes through Foundation's normalization.
        let normalized = trimmed.utf8.allSatisfy { $0 < 0x80 } ? trimmed : trimmed.precomposedStringWithCanonicalMapping
        guard normalized.utf8.count <= maximumNameComponentBytes else {
            throw .invalidValue(field, "\(field) must be at most 256 UTF-8 bytes after NFC normalization")
        }
        return normalized
    }

    /// The email rules: no whitespace, control or bidi characters, at most 254 bytes, exactly one `@`,
    /// a local part of 1 to 64 bytes and a non-empty domain. The email is otherwise kept as given.
    static func validatedEmail(_ value: String?) throws(ProfileValidationError) -> String? {
        guard let value else { return nil }
        for scalar in value.unicodeScalars {
            if isWhitespace(scalar) || isControl(scalar) || isBidiControl(scalar) {
                throw .invalidValue("email", "email must not contain whitespace or control characters")
            }
        }
        guard value.utf8.count <= maximumEmailBytes else {
            throw .invalidValue("email", "email must be at most 254 bytes long")
        }
        let parts = value.utf8.split(separator: UInt8(ascii: "@"), omittingEmptySubsequences: false)
        guard parts.count == 2 else {
            throw .invalidValue("email", "email must contain exactly one @")
        }
        guard !parts[0].isEmpty, parts[0].count <= maximumEmailLocalPartBytes else {
            throw .invalidValue("email", "the local part of email must be 1 to 64 bytes long")
        }
        guard !parts[1].isEmpty else {
            throw .invalidValue("email", "the domain of email must not be empty")
        }
        return value
    }

    /// Whether a (validated) email's domain is the private relay domain, ASCII case-insensitively.
    static func isPrivateRelay(_ email: String) -> Bool {
        guard let at = email.utf8.firstIndex(of: UInt8(ascii: "@")) else { return false }
        let domain = email.utf8[email.utf8.index(after: at)...]
        return domain.count == privateRelayDomain.utf8.count
            && zip(domain, privateRelayDomain.utf8).allSatisfy { lhs, rhs in asciiLowercased(lhs) == rhs }
    }

    private static func asciiLowercased(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 0x20 : byte
    }

    /// C0 (U+0000–U+001F, which includes TAB, CR and LF), DEL, C1 (U+0080–U+009F) and the line and
    /// paragraph separators U+2028 and U+2029.
    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029: true
        default: false
        }
    }

    /// The bidi embeddings and overrides U+202A–U+202E and isolates U+2066–U+2069 that the profile rules name.
    /// We also refuse the invisible bidi marks U+200E (LRM), U+200F (RLM) and U+061C (ALM): they are not
    /// in the rules' list, but they reorder text just as invisibly and no real name needs them.
    static func isBidiControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x202A...0x202E, 0x2066...0x2069, 0x200E, 0x200F, 0x061C: true
        default: false
        }
    }

    /// Unicode's `White_Space` property; ASCII scalars are answered without the property table's lookup (in ASCII,
    /// U+0009 to U+000D and U+0020 are white space).
    static func isWhitespace(_ scalar: Unicode.Scalar) -> Bool {
        guard scalar.isASCII else { return scalar.properties.isWhitespace }
        return scalar.value == 0x20 || (0x09...0x0D).contains(scalar.value)
    }

    /// Removes leading and trailing Unicode `White_Space` scalars.
    private static func trimmingWhitespace(_ value: String) -> String {
        let scalars = value.unicodeScalars
        guard let first = scalars.firstIndex(where: { !isWhitespace($0) }),
            let last = scalars.lastIndex(where: { !isWhitespace($0) })
        else { return "" }
        return String(scalars[first...last])
    }
}
