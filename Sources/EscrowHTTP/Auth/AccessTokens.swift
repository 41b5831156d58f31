public import EscrowCore
import EscrowCrypto
public import Foundation

/// Bearer tokens of the HTTP API: `pe_` followed by 32 random bytes in base64url, shown once, stored
/// as their BLAKE2b-256 hash.
public enum AccessTokens {
    public static let prefix = "pe_"
    /// A longer `Authorization` value is refused without hashing it.
    static let maximumLength = 256

    /// A new random token.
    public static func generate() -> String {
        prefix + Base64URL.encode(Hashing.randomBytes(count: 32))
    }

    /// BLAKE2b-256 of the token's UTF-8 bytes: what the store keeps.
    public static func hash(_ token: String) -> [UInt8] {
        Hashing.blake2b256(Array(token.utf8))
    }

    /// Makes a token named `name` with `scopes`, stores its hash and returns the token, which is not
    /// kept anywhere else: show it once.
    public static func issue(
        name: String,
        scopes: Set<AccessTokenScope>,
        store: any AccessTokenStore,
        now: Date = Date()
    ) async throws -> String {
        precondition(AccessTokenRecord.isValidName(name), "token names are [A-Za-z0-9._-]{1,64}")
        let token = generate()
        try await store.addToken(AccessTokenRecord(name: name, scopes: scopes, hash: hash(token), createdAt: now))
        return token
    }
}
