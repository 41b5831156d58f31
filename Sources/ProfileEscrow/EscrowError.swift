/// A failure of an escrow operation. Its description never holds a name, email, user identifier
/// or key: callers may log it and show it.
public struct EscrowError: Error, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// No live escrow for this user or id.
        public static let notFound = Code(rawValue: "not_found")
        /// This node holds a public-only keyring: it can capture but never open.
        public static let captureOnly = Code(rawValue: "capture_only")
        /// The row is intact but this keyring lacks the secret key it is sealed to (retired, or an old keyring).
        public static let keyUnavailable = Code(rawValue: "key_unavailable")
        /// The stored row failed its MAC or did not open; it was moved to `dead`.
        public static let ciphertextInvalid = Code(rawValue: "ciphertext_invalid")
        /// A key version is still used by escrows, or is the active one.
        public static let keyInUse = Code(rawValue: "key_in_use")
        /// The escrow kept changing under a concurrent writer; try again.
        public static let conflict = Code(rawValue: "conflict")
        /// A worker or client setting is missing or out of range.
        public static let invalidConfiguration = Code(rawValue: "invalid_configuration")
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}
