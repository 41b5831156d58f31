public import Foundation

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
