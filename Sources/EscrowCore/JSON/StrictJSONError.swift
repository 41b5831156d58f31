/// Why ``StrictJSON`` refused a text.
///
/// Its `description` is deliberately generic and built from the ``code`` alone, so logging an error never leaks
/// data. ``message`` names the problem and the byte offset (and for a duplicate key, its path, with unknown keys
/// shown as `<key>`); never a string's value.
public struct StrictJSONError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable, machine-readable error code. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable snake_case name, e.g. `duplicate_key`.
        public let rawValue: String

        init(_ rawValue: String) {
            self.rawValue = rawValue
        }

        public var description: String { rawValue }

        /// The text ended inside a value.
        public static let unexpectedEnd = Code("unexpected_end")
        /// A byte that no JSON value may hold at this place.
        public static let unexpectedByte = Code("unexpected_byte")
        /// The text is not valid UTF-8.
        public static let invalidUTF8 = Code("invalid_utf8")
        /// A raw control character (below U+0020) inside a string.
        public static let controlCharacterInString = Code("control_character_in_string")
        /// A backslash escape that JSON does not define.
        public static let invalidEscape = Code("invalid_escape")
        /// An unpaired UTF-16 surrogate in a `\u` escape.
        public static let loneSurrogate = Code("lone_surrogate")
        /// A number with a leading zero (`01`).
        public static let leadingZero = Code("leading_zero")
        /// A number that JSON's grammar does not allow.
        public static let invalidNumber = Code("invalid_number")
        /// Nesting deeper than ``StrictJSON/maximumDepth``.
        public static let tooDeep = Code("too_deep")
        /// The same key twice in one object (compared after unescaping).
        public static let duplicateKey = Code("duplicate_key")
        /// Something after the JSON value.
        public static let trailingData = Code("trailing_data")
    }

    /// What went wrong.
    public let code: Code
    /// The byte offset in the input where the problem was found.
    public let offset: Int
    /// For ``Code/duplicateKey``: the path of the repeated key, e.g. `"fullName.givenName"`.
    public let path: String?

    init(_ code: Code, offset: Int, path: String? = nil) {
        self.code = code
        self.offset = offset
        self.path = path
    }

    /// A value-free explanation for an operator or a client.
    public var message: String {
        let what =
            switch code {
            case .unexpectedEnd: "unexpected end of input"
            case .invalidUTF8: "invalid UTF-8"
            case .controlCharacterInString: "unescaped control character in a string"
            case .invalidEscape: "invalid escape sequence"
            case .loneSurrogate: "unpaired UTF-16 surrogate in a \\u escape"
            case .leadingZero: "number with a leading zero"
            case .invalidNumber: "invalid number"
            case .tooDeep: "nesting deeper than \(StrictJSON.maximumDepth) levels"
            case .duplicateKey: "duplicate key \(path ?? "")"
            case .trailingData: "data after the JSON value"
            default: "unexpected character"
            }
        return "malformed JSON: \(what) at byte offset \(offset)"
    }

    /// Generic and code-based: `StrictJSONError(duplicate_key)`.
    public var description: String { "StrictJSONError(\(code.rawValue))" }
}
