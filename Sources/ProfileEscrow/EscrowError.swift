public import EscrowCore

/// A failure of an escrow operation.
///
/// Its `description` is deliberately generic and built from the ``code`` alone, so logging an error never leaks
/// data. ``message`` is meant for an operator or a client (the CLI prints it, problem+json carries it as
/// `detail`) and never holds a name, email, user identifier or key.
public struct EscrowError: Error, Sendable, CustomStringConvertible {
    /// A stable, machine-readable error code. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable snake_case name, e.g. `not_found`.
        public let rawValue: String

        init(_ rawValue: String) {
            self.rawValue = rawValue
        }

        public var description: String { rawValue }

        /// No live escrow for this user or id.
        public static let notFound = Code("not_found")
        /// This node holds a public-only keyring: it can capture but never open.
        public static let captureOnly = Code("capture_only")
        /// The row is intact but this keyring lacks the secret key it is sealed to (retired, or an old keyring).
        public static let keyUnavailable = Code("key_unavailable")
        /// The stored row failed its MAC or did not open; it was moved to `dead`.
        public static let ciphertextInvalid = Code("ciphertext_invalid")
        /// This node's keyring seals to a retired master key version: it refuses to capture until its keyring file
        /// is reloaded (nothing is stored that nobody could open).
        public static let keyringOutdated = Code("keyring_outdated")
        /// A key version is still used by escrows, or is the active one.
        public static let keyInUse = Code("key_in_use")
        /// The escrow kept changing under a concurrent writer; try again.
        public static let conflict = Code("conflict")
        /// A worker or client setting is missing or out of range.
        public static let invalidConfiguration = Code("invalid_configuration")
        /// This process has no backend to deliver to (a node without a worker): another node, or `replay`, has one.
        public static let noBackend = Code("no_backend")
    }

    /// What went wrong.
    public let code: Code
    /// A PII-free explanation for an operator or a client.
    public let message: String

    /// Makes an error. `message` must hold no name, email, user identifier or key.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// Generic and code-based: `EscrowError(not_found)`.
    public var description: String { "EscrowError(\(code.rawValue))" }
}

extension EscrowError: ClassifiedFailure {
    public var failureKind: FailureKind {
        switch code {
        case .notFound: .notFound
        // A capture-only node cannot open: another node can (HTTP's `409 capture_only`, the CLI's "keyring
        // unavailable"). A concurrent writer kept changing the escrow: the next attempt can. A node without a
        // backend cannot test it: a node with a worker can.
        case .captureOnly, .conflict, .noBackend: .conflict
        // This node's keyring cannot do it now (out of date, or without that version): reloaded, it can.
        case .keyUnavailable, .keyringOutdated: .unavailable
        case .ciphertextInvalid: .damaged
        // A key version still in use (a refused key operation), a setting out of range.
        case .keyInUse, .invalidConfiguration: .badInput
        default: .internal
        }
    }
}
