public import Foundation

/// What a bearer token of the HTTP API may do (SPEC §9).
public enum AccessTokenScope: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
    case capture, read, replay, confirm, erase, metrics

    public static func < (lhs: Self, rhs: Self) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// A stored bearer token: its name, scopes and the BLAKE2b-256 hash of the token. The token itself is
/// shown once, when it is made, and never stored.
public struct AccessTokenRecord: Sendable, Equatable {
    /// `[A-Za-z0-9._-]{1,64}`; the audit actor is `http:<name>`.
    public var name: String
    public var scopes: Set<AccessTokenScope>
    /// BLAKE2b-256 of the token's UTF-8 bytes.
    public var hash: [UInt8]
    public var createdAt: Date
    public var revokedAt: Date?

    public init(name: String, scopes: Set<AccessTokenScope>, hash: [UInt8], createdAt: Date, revokedAt: Date? = nil) {
        self.name = name
        self.scopes = scopes
        self.hash = hash
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }

    public var isRevoked: Bool { revokedAt != nil }

    /// Whether `name` is a valid token name: 1–64 characters of `[A-Za-z0-9._-]`.
    public static func isValidName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count)
            && name.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                    true
                default: false
                }
            }
    }
}

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

/// Which Apple server-to-server notifications were already handled, by a hash of their `jti`.
///
/// A notification is recorded only after it was applied: a crash in between leaves it unrecorded,
/// and Apple's retry applies it again (every notification's effect is idempotent). Recording first
/// would lose a `consent-revoked` purge to such a crash.
public protocol NotificationLog: Sendable {
    /// Whether a notification id was already handled.
    func hasNotification(idHash: [UInt8]) async throws -> Bool

    /// Records a handled notification id; returns false when it was already recorded.
    func recordNotification(idHash: [UInt8], at now: Date) async throws -> Bool
}

extension EscrowStoreError.Code {
    /// An active token with this name already exists.
    public static let tokenExists = Self(rawValue: "token_exists")
}
