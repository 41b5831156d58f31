public import Foundation

/// Where the HTTP API's bearer tokens live. Only hashes are stored.
public protocol AccessTokenStore: Sendable {
    /// Adds a token. A revoked token of the same name is replaced; an active one is an error
    /// (``EscrowStoreError/Code/tokenExists``).
    func addToken(_ record: AccessTokenRecord) async throws

    /// Every token, active and revoked, ordered by name.
    func tokens() async throws -> [AccessTokenRecord]

    /// Revokes the active token `name`; returns false when there is none.
    func revokeToken(name: String, at now: Date) async throws -> Bool

    /// The token whose hash is `hash`, active or revoked, if any. Asked at every request: a token
    /// added or revoked by another process must be seen by the next call.
    func token(hash: [UInt8]) async throws -> AccessTokenRecord?
}
