public import EscrowCore
public import EscrowCrypto

extension OperatorActions {
    /// An operator's input refused before anything was done: a filter, a page, a reason, an escrow id or a user
    /// identifier that breaks its rule. ``message`` names the rule and ``field`` the input, never the value given;
    /// ``code`` is the API's problem code (`invalid_parameter`, `invalid_user_identifier`).
    public struct InputError: Error, Sendable, Equatable, ClassifiedFailure, CustomStringConvertible {
        public var code: String
        public var field: String?
        public var message: String

        public init(code: String = "invalid_parameter", field: String?, _ message: String) {
            self.code = code
            self.field = field
            self.message = message
        }

        public var failureKind: FailureKind { .badInput }

        /// Generic and code-based: `OperatorActions.InputError(invalid_parameter)`.
        public var description: String { "OperatorActions.InputError(\(code))" }

        public static let invalidReason = InputError(field: "reason", OperatorReason.rule)
        public static let missingReason = InputError(field: "reason", "reason is required: " + OperatorReason.rule)
        public static let invalidUserIdentifier = InputError(
            code: "invalid_user_identifier",
            field: "userIdentifier",
            "userIdentifier must be 1-255 bytes of [0-9A-Za-z._-]"
        )
    }

    /// The escrow id of a path or a form: 32 lowercase hex characters.
    public static func escrowID(_ text: String?) throws(InputError) -> EscrowID {
        guard let text, let id = EscrowID(hex: text) else {
            throw InputError(field: "escrowId", "escrowId must be 32 lowercase hex characters")
        }
        return id
    }

    /// The operator's reason, required for every change made through the API or the console: nil when none was given.
    public static func reason(_ text: String?) throws(InputError) -> OperatorReason {
        guard let text else { throw InputError.missingReason }
        guard let reason = OperatorReason(text) else { throw InputError.invalidReason }
        return reason
    }

    /// A user identifier to look up, as given (never trimmed or echoed).
    public static func userIdentifier(_ text: String?) throws(InputError) -> String {
        guard let text, UserIdentifier.isValid(text) else { throw InputError.invalidUserIdentifier }
        return text
    }
}
