/// The rule for Apple's stable user identifier (`sub`): 1–255 bytes of `[0-9A-Za-z._-]`.
///
/// Its one home: a profile, the HTTP path parameter, an Apple notification's `sub` and the CLI's argument
/// are all checked here. Errors name the rule, never the value.
public enum UserIdentifier {
    /// The longest user identifier, in bytes.
    public static let maximumBytes = 255

    /// Whether `value` is a well-formed user identifier.
    public static func isValid(_ value: String) -> Bool {
        (1...maximumBytes).contains(value.utf8.count) && value.utf8.allSatisfy(isAllowed)
    }

    /// Throws ``ProfileValidationError/Code/invalidValue`` at the field `userIdentifier`, naming the broken rule.
    public static func validate(_ value: String) throws(ProfileValidationError) {
        guard (1...maximumBytes).contains(value.utf8.count) else {
            throw .invalidValue("userIdentifier", "userIdentifier must be 1 to \(maximumBytes) bytes long")
        }
        guard value.utf8.allSatisfy(isAllowed) else {
            throw .invalidValue("userIdentifier", "userIdentifier may contain only the characters [0-9A-Za-z._-]")
        }
    }

    private static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
            true
        default:
            false
        }
    }
}
