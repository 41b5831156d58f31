/// Why ``StrictJSON`` refused a text. Carries a byte offset and, for duplicate keys, a path; never a
/// string's value.
struct StrictJSONError: Error, Sendable, Equatable, CustomStringConvertible {
    enum Reason: Sendable, Equatable {
        case unexpectedEnd
        case unexpectedByte
        case invalidUTF8
        case controlCharacterInString
        case invalidEscape
        case loneSurrogate
        case leadingZero
        case invalidNumber
        case tooDeep
        case duplicateKey
        case trailingData
    }

    let reason: Reason
    /// The byte offset in the input where the problem was found.
    let offset: Int
    /// For ``Reason/duplicateKey``: the path of the repeated key, e.g. `"fullName.givenName"`.
    let path: String?

    init(_ reason: Reason, offset: Int, path: String? = nil) {
        self.reason = reason
        self.offset = offset
        self.path = path
    }

    var message: String {
        let what =
            switch reason {
            case .unexpectedEnd: "unexpected end of input"
            case .unexpectedByte: "unexpected character"
            case .invalidUTF8: "invalid UTF-8"
            case .controlCharacterInString: "unescaped control character in a string"
            case .invalidEscape: "invalid escape sequence"
            case .loneSurrogate: "unpaired UTF-16 surrogate in a \\u escape"
            case .leadingZero: "number with a leading zero"
            case .invalidNumber: "invalid number"
            case .tooDeep: "nesting deeper than \(StrictJSON.maximumDepth) levels"
            case .duplicateKey: "duplicate key \(path ?? "")"
            case .trailingData: "data after the JSON value"
            }
        return "malformed JSON: \(what) at byte offset \(offset)"
    }

    var description: String { "StrictJSONError: \(message)" }
}
