/// Why a profile was refused.
///
/// Its `description` is deliberately generic and built from the ``code`` alone, so logging an error never leaks
/// data. ``field`` is the JSON path of the member (`"fullName.givenName"`) and ``message`` names the rule that was
/// broken, for a client or an operator; neither ever holds the value: a name, email or user identifier must not
/// reach logs, problem+json responses or metrics through an error. Like postgres-nio's `PSQLError`, the set of
/// codes is extensible without breaking callers that switch over it.
public struct ProfileValidationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable, machine-readable reason (snake_case), suitable for a problem+json `code`. New codes may be
    /// added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable snake_case name, e.g. `invalid_value`.
        public let rawValue: String

        init(_ rawValue: String) {
            self.rawValue = rawValue
        }

        public var description: String { rawValue }

        /// The body is not valid RFC 8259 JSON (including duplicate keys and nesting deeper than 32).
        public static let malformedJSON = Code("malformed_json")
        /// The body is larger than the limit (``ProfileParser/maximumBodySize`` unless configured).
        public static let bodyTooLarge = Code("body_too_large")
        /// A member that the profile input does not define.
        public static let unknownField = Code("unknown_field")
        /// A member of the wrong JSON type (for example a number where a string is expected).
        public static let invalidType = Code("invalid_type")
        /// A member of the right type whose value breaks a rule.
        public static let invalidValue = Code("invalid_value")
        /// A required member is absent (or `null`).
        public static let missingField = Code("missing_field")
        /// Neither a name component nor an email is present: there is nothing to escrow.
        public static let nothingToEscrow = Code("nothing_to_escrow")
        /// A member only a verified capture accepts (`authorizationCode`) was given to one that verifies no identity
        /// token.
        public static let needsVerifiedCapture = Code("needs_verified_capture")
    }

    /// The reason.
    public let code: Code
    /// The JSON path of the offending member (`"fullName.givenName"`), or `nil` when the error concerns
    /// the whole body.
    public let field: String?
    /// A human-readable explanation naming the rule. Never contains the offending value.
    public let message: String

    /// Makes an error. `field` and `message` must never hold the offending value.
    public init(code: Code, field: String?, message: String) {
        self.code = code
        self.field = field
        self.message = message
    }

    /// Generic and code-based: `ProfileValidationError(invalid_value)`.
    public var description: String { "ProfileValidationError(\(code.rawValue))" }
}

extension ProfileValidationError {
    static func invalidValue(_ field: String, _ message: String) -> Self {
        Self(code: .invalidValue, field: field, message: message)
    }

    static func invalidType(_ field: String?, expected: String) -> Self {
        Self(code: .invalidType, field: field, message: "\(field ?? "the body") must be \(expected)")
    }

    static func missingField(_ field: String) -> Self {
        Self(code: .missingField, field: field, message: "\(field) is required")
    }

    static func unknownField(_ field: String) -> Self {
        Self(code: .unknownField, field: field, message: "\(field) is not a known field")
    }
}
