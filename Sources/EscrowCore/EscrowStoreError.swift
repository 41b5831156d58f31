/// A storage failure. Its description is generic: no SQL arguments, no row contents.
public struct EscrowStoreError: Error, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The store cannot be opened or reached.
        public static let unavailable = Code(rawValue: "store_unavailable")
        /// Another process holds the single writer slot (SQLite before 3.51.3).
        public static let writerLocked = Code(rawValue: "writer_locked")
        /// The store was opened read-only and a change was asked for.
        public static let readOnly = Code(rawValue: "read_only")
        /// The schema is newer than this program, or a migration failed.
        public static let schema = Code(rawValue: "schema")
        /// A query or transaction failed.
        public static let failed = Code(rawValue: "store_failed")
        /// An active access token with this name already exists (``AccessTokenStore/addToken(_:)``).
        public static let tokenExists = Code(rawValue: "token_exists")
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
