/// A storage failure. Its description is generic: no SQL arguments, no row contents.
public struct EscrowStoreError: Error, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The store cannot be opened or reached.
        public static let unavailable = Code(rawValue: "store_unavailable")
        /// Another process kept the store's write lock past the wait bound; the operation did nothing.
        public static let busy = Code(rawValue: "store_busy")
        /// The store was opened read-only and a change was asked for.
        public static let readOnly = Code(rawValue: "read_only")
        /// The schema is newer than this program, or a migration failed.
        public static let schema = Code(rawValue: "schema")
        /// A stored row does not decode (a value out of range, a wrong length): it is moved to `dead`
        /// (`ciphertext_invalid`) when a worker meets it, and never stops the others.
        public static let malformedRow = Code(rawValue: "malformed_row")
        /// A query or transaction failed.
        public static let failed = Code(rawValue: "store_failed")
    }

    public let code: Code
    /// PII-free explanation, safe to log and show.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}
