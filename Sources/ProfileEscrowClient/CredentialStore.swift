public import Foundation

/// Where the client keeps what must survive the app being killed: the attempt secret from the moment an attempt
/// starts, and Apple's credential (identity token, authorization code, name, email) until the escrow holds it.
///
/// A small key-value store of opaque items, as the Keychain is: ``KeychainCredentialStore`` on Apple platforms,
/// ``FileCredentialStore`` elsewhere and in tests. An implementation must make a ``save(_:as:)`` durable before it
/// returns, keep items readable by this app alone, and never log their names' values or their bytes.
public protocol CredentialStore: Sendable {
    /// Writes `item` under `name`, replacing what was there; durable when this returns.
    func save(_ item: Data, as name: String) throws

    /// The item saved under `name`; nil when there is none.
    func load(_ name: String) throws -> Data?

    /// Deletes the item under `name`; nothing when there is none.
    func remove(_ name: String) throws

    /// The names of every item kept.
    func names() throws -> [String]
}

/// A store's failure: what it was doing and the system's status (an `errno` or an `OSStatus`), never an item's name
/// or bytes.
public struct CredentialStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    public var operation: String
    public var status: Int32

    public init(_ operation: String, status: Int32) {
        self.operation = operation
        self.status = status
    }

    public var description: String { "the credential store could not \(operation) (status \(status))" }
}
