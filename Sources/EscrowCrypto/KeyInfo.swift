public import Foundation

/// Public facts about one master key version, for `keys show` and for deciding what to retire.
public struct KeyInfo: Sendable, Equatable {
    /// The version number (1, 2, ...).
    public let version: UInt32
    /// The X25519 master public key (32 bytes).
    public let publicKey: [UInt8]
    /// Whether this keyring holds the version's secret key (false when public-only or retired).
    public let hasSecretKey: Bool
    /// When the version was created, to the second.
    public let createdAt: Date

    /// Describes one master key version.
    public init(version: UInt32, publicKey: [UInt8], hasSecretKey: Bool, createdAt: Date) {
        self.version = version
        self.publicKey = publicKey
        self.hasSecretKey = hasSecretKey
        self.createdAt = createdAt
    }
}
