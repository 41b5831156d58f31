/// A storage failure.
///
/// Its `description` is deliberately generic and built from the ``code`` alone, so logging an error never leaks
/// data. ``message`` is meant for an operator (it can name a file path, an SQLite result code or the write lock
/// it waited for) and never holds SQL arguments, row contents, a name, an email or a user identifier.
public struct EscrowStoreError: Error, Sendable, CustomStringConvertible {
    /// A stable, machine-readable error code. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable snake_case name, e.g. `store_busy`.
        public let rawValue: String

        init(_ rawValue: String) {
            self.rawValue = rawValue
        }

        public var description: String { rawValue }

        /// The store cannot be opened or reached.
        public static let unavailable = Code("store_unavailable")
        /// Another process kept the store's write lock past the wait bound; the operation did nothing.
        public static let busy = Code("store_busy")
        /// The store was opened read-only and a change was asked for.
        public static let readOnly = Code("read_only")
        /// The schema is newer than this program, or a migration failed.
        public static let schema = Code("schema")
        /// A stored row does not decode (a value out of range, a wrong length): it is moved to `dead`
        /// (`ciphertext_invalid`) when a worker meets it, and never stops the others.
        public static let malformedRow = Code("malformed_row")
        /// A capture or change sealed to a retired master key version was refused: nobody could open it.
        public static let keyVersionRetired = Code("key_version_retired")
        /// A master key version still seals live escrows and cannot be retired.
        public static let keyVersionInUse = Code("key_version_in_use")
        /// A query or transaction failed.
        public static let failed = Code("store_failed")
        /// An active access token with this name already exists (``AccessTokenStore/addToken(_:)``).
        public static let tokenExists = Code("token_exists")
    }

    /// What went wrong.
    public let code: Code
    /// A PII-free explanation for an operator.
    public let message: String

    /// Makes an error. `message` must hold no SQL argument, row content, name, email or user identifier.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// Generic and code-based: `EscrowStoreError(store_busy)`.
    public var description: String { "EscrowStoreError(\(code.rawValue))" }
}
