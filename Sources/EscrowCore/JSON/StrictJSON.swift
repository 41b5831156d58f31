/// A strict RFC 8259 JSON parser for untrusted input.
///
/// Foundation's decoders silently accept duplicate keys (the last one wins), so a body could carry two
/// different `userIdentifier`s and different layers would disagree about which one counts. `StrictJSON`
/// refuses duplicate keys (compared after unescaping), invalid UTF-8, lone surrogates in `\u` escapes,
/// numbers with leading zeros or otherwise not valid JSON, raw control characters in strings, nesting
/// deeper than ``maximumDepth`` and anything after the value. Objects keep their members in order.
///
/// Errors carry a byte offset and, for duplicate keys, the path; never a string's value.
///
/// Every untrusted JSON text goes through it: profiles, the sealed plaintext, Apple's notifications (the body,
/// the JWS header and payload, the `events` claim) and the JWKS file.
public enum StrictJSON {
    /// The deepest nesting of objects and arrays accepted; the top-level container is depth 1.
    public static let maximumDepth = 32

    /// A parsed JSON value.
    public enum Value: Sendable, Equatable {
        case null
        case bool(Bool)
        /// A number, kept as its (validated) literal text so that nothing is lost to rounding.
        case number(String)
        case string(String)
        case array([Value])
        /// An object's members in document order; keys are unique.
        case object([Member])
    }

    /// One member of an object.
    public struct Member: Sendable, Equatable {
        public let key: String
        public let value: Value
    }

    /// Parses one JSON text.
    public static func parse(_ bytes: some Collection<UInt8>) throws(StrictJSONError) -> Value {
        let parseBuffer = { (buffer: UnsafeRawBufferPointer) -> Result<Value, StrictJSONError> in
            Result { () throws(StrictJSONError) in try parse(buffer) }
        }
        if let result = bytes.withContiguousStorageIfAvailable({ parseBuffer(UnsafeRawBufferPointer($0)) }) {
            return try result.get()
        }
        var copy = Array(bytes)
        defer { copy.withUnsafeMutableBytes { StrictJSONParser.zero($0) } }
        return try copy.withUnsafeBytes(parseBuffer).get()
    }

    /// Parses one JSON text from raw memory (for example a `SecretBytes` buffer, without copying it).
    static func parse(_ buffer: UnsafeRawBufferPointer) throws(StrictJSONError) -> Value {
        var parser = StrictJSONParser(bytes: buffer)
        return try parser.parseDocument()
    }

    /// Every key the project's JSON documents define (the profile, its name, the sealed
    /// plaintext). Only these are ever written into an error path.
    static let knownKeys: Set<String> = [
        "userIdentifier", "fullName", "email", "isPrivateEmail", "realUserStatus", "identityToken",
        "authorizationCode", "givenName", "familyName", "middleName", "namePrefix", "nameSuffix", "nickname", "v",
        "verified", "capturedAt",
    ]

    /// How a key appears in an error path: as itself when it is one of ``knownKeys``, otherwise as
    /// `<key>`. A key is text chosen by the sender and could itself be a name or an email
    /// (`{"fullName": {"Ana": "Ng"}}`): an unknown key is never echoed.
    package static func displayName(forKey key: String) -> String {
        knownKeys.contains(key) ? key : "<key>"
    }
}

extension StrictJSON.Value {
    /// The value of the member `key` when this is an object that has it; `nil` otherwise.
    public subscript(key: String) -> StrictJSON.Value? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    /// The text when this is a string.
    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// The flag when this is a boolean.
    public var boolValue: Bool? {
        if case .bool(let flag) = self { return flag }
        return nil
    }

    /// The elements when this is an array.
    public var arrayValue: [StrictJSON.Value]? {
        if case .array(let elements) = self { return elements }
        return nil
    }
}
