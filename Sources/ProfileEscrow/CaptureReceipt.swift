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

/// Metadata of a live escrow, for `status` and `GET /v1/escrows/{userIdentifier}`: never plaintext.
public struct EscrowStatus: Sendable, Equatable {
    public var escrowID: EscrowID
    public var indexPrefix: String
    public var state: EscrowState
    public var attempts: Int
    public var nextAttemptAt: Date?
    public var createdAt: Date
    public var expiresAt: Date
    public var keyVersion: UInt32
    public var deadCode: DeadCode?
    public var lastStatus: Int?

    init(_ record: EscrowRecord) {
        escrowID = record.id
        indexPrefix = record.blindIndex.prefixHex
        state = record.state
        attempts = record.attempts
        nextAttemptAt = record.dueAt
        createdAt = record.createdAt
        expiresAt = record.expiresAt
        keyVersion = record.sealed.keyVersion
        deadCode = record.deadCode
        lastStatus = record.lastStatus
    }
}
