public import EscrowCore
public import EscrowCrypto
public import Foundation

/// What a capture returns: never the profile, only what a caller needs to follow the escrow.
public struct CaptureReceipt: Sendable, Equatable {
    public enum Outcome: String, Sendable, Equatable {
        /// A new escrow.
        case created
        /// The same content was already held; nothing changed.
        case unchanged
        /// A new escrow; the previous one for this user was purged as `replaced`.
        case replaced
    }

    public var escrowID: EscrowID
    public var state: EscrowState
    public var expiresAt: Date
    public var outcome: Outcome
}
