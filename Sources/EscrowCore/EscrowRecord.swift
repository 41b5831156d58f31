public import EscrowCrypto
public import Foundation

/// One stored escrow: the sealed bytes plus the metadata the lifecycle needs. Holds no plaintext.
public struct EscrowRecord: Sendable, Equatable {
    public var sealed: SealedEscrow
    /// Keyed fingerprint of the plaintext: tells "the same content again" without opening anything.
    public var contentTag: [UInt8]
    public var state: EscrowState
    /// Bumped by every change; a lease's fencing token is the revision it was granted at.
    public var revision: Int64
    /// Delivery attempts started so far (counted when a lease is granted).
    public var attempts: Int
    public var nextAttemptAt: Date
    public var leaseOwner: String?
    public var leaseExpiresAt: Date?
    public var confirmDeadline: Date?
    public var createdAt: Date
    public var expiresAt: Date
    public var updatedAt: Date
    public var deadCode: DeadCode?
    /// The HTTP status of the last delivery attempt, if any.
    public var lastStatus: Int?

    public var id: EscrowID { sealed.id }
    public var blindIndex: BlindIndex { sealed.blindIndex }

    public init(
        sealed: SealedEscrow,
        contentTag: [UInt8],
        createdAt: Date,
        expiresAt: Date
    ) {
        self.sealed = sealed
        self.contentTag = contentTag
        self.state = .pending
        self.revision = 1
        self.attempts = 0
        self.nextAttemptAt = createdAt
        self.leaseOwner = nil
        self.leaseExpiresAt = nil
        self.confirmDeadline = nil
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.updatedAt = createdAt
        self.deadCode = nil
        self.lastStatus = nil
    }

    /// Full memberwise initializer, for storage backends that read rows back.
    public init(
        sealed: SealedEscrow,
        contentTag: [UInt8],
        state: EscrowState,
        revision: Int64,
        attempts: Int,
        nextAttemptAt: Date,
        leaseOwner: String?,
        leaseExpiresAt: Date?,
        confirmDeadline: Date?,
        createdAt: Date,
        expiresAt: Date,
        updatedAt: Date,
        deadCode: DeadCode?,
        lastStatus: Int?
    ) {
        self.sealed = sealed
        self.contentTag = contentTag
        self.state = state
        self.revision = revision
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.leaseOwner = leaseOwner
        self.leaseExpiresAt = leaseExpiresAt
        self.confirmDeadline = confirmDeadline
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.updatedAt = updatedAt
        self.deadCode = deadCode
        self.lastStatus = lastStatus
    }

    /// When a worker may take this escrow next: the next attempt when pending, the lease's end when
    /// leased, the confirmation deadline after a `202`; never when dead.
    public var dueAt: Date? {
        switch state {
        case .pending: nextAttemptAt
        case .leased: leaseExpiresAt ?? .distantPast
        case .awaitingConfirmation: confirmDeadline ?? .distantPast
        case .dead, .purged: nil
        }
    }

    /// Whether a worker may take this escrow at `now`.
    public func isDue(at now: Date) -> Bool {
        guard let dueAt else { return false }
        return dueAt <= now
    }
}
