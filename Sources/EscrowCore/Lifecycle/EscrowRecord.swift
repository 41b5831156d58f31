public import EscrowCrypto
public import Foundation

/// One stored escrow: the sealed bytes plus the metadata the lifecycle needs. Holds no plaintext.
///
/// What only some states have lives in ``Phase``: a lease exists only while `leased` (owner and end
/// together), a confirmation deadline only while `awaiting-confirmation`, a dead code only while
/// `dead`. A record in an impossible state (a lease without an end, dead without a reason) cannot be
/// built, and a store that reads one back treats the row as malformed.
public struct EscrowRecord: Sendable, Equatable {
    /// What the state carries.
    public enum Phase: Sendable, Equatable {
        /// Waiting for delivery at ``EscrowRecord/nextAttemptAt``.
        case pending
        /// A worker holds it until the lease runs out.
        case leased(Lease)
        /// The backend answered `202`; delivered again if no confirm call arrives by `deadline`.
        case awaitingConfirmation(deadline: Date)
        /// Given up, for this reason.
        case dead(DeadCode)

        public var state: EscrowState {
            switch self {
            case .pending: .pending
            case .leased: .leased
            case .awaitingConfirmation: .awaitingConfirmation
            case .dead: .dead
            }
        }
    }

    public var sealed: SealedEscrow
    /// Keyed fingerprint of the plaintext: tells "the same content again" without opening anything.
    public var contentTag: [UInt8]
    public var phase: Phase
    /// Bumped by every change; a lease's fencing token is the revision it was granted at.
    public var revision: Int64
    /// Delivery attempts made so far: requests sent, or leases lost with their outcome unknown.
    public var attempts: Int
    public var nextAttemptAt: Date
    public var createdAt: Date
    public var expiresAt: Date
    public var updatedAt: Date
    /// The HTTP status of the last delivery attempt, if any.
    public var lastStatus: Int?

    public var id: EscrowID { sealed.id }
    public var blindIndex: BlindIndex { sealed.blindIndex }
    public var state: EscrowState { phase.state }

    public var lease: Lease? {
        if case .leased(let lease) = phase { return lease }
        return nil
    }
    public var leaseOwner: String? { lease?.owner }
    public var leaseExpiresAt: Date? { lease?.expiresAt }
    public var confirmDeadline: Date? {
        if case .awaitingConfirmation(let deadline) = phase { return deadline }
        return nil
    }
    public var deadCode: DeadCode? {
        if case .dead(let code) = phase { return code }
        return nil
    }

    /// A new escrow: pending, due at once.
    public init(
        sealed: SealedEscrow,
        contentTag: [UInt8],
        createdAt: Date,
        expiresAt: Date
    ) {
        self.init(
            sealed: sealed,
            contentTag: contentTag,
            phase: .pending,
            revision: 1,
            attempts: 0,
            nextAttemptAt: createdAt,
            createdAt: createdAt,
            expiresAt: expiresAt,
            updatedAt: createdAt,
            lastStatus: nil
        )
    }

    /// Every field, for storage backends that read rows back.
    public init(
        sealed: SealedEscrow,
        contentTag: [UInt8],
        phase: Phase,
        revision: Int64,
        attempts: Int,
        nextAttemptAt: Date,
        createdAt: Date,
        expiresAt: Date,
        updatedAt: Date,
        lastStatus: Int?
    ) {
        self.sealed = sealed
        self.contentTag = contentTag
        self.phase = phase
        self.revision = revision
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.updatedAt = updatedAt
        self.lastStatus = lastStatus
    }

    /// When a worker may take this escrow next: the next attempt when pending, the lease's end when
    /// leased, the confirmation deadline after a `202`; never when dead.
    public var dueAt: Date? {
        switch phase {
        case .pending: nextAttemptAt
        case .leased(let lease): lease.expiresAt
        case .awaitingConfirmation(let deadline): deadline
        case .dead: nil
        }
    }

    /// Whether a worker may take this escrow at `now`.
    public func isDue(at now: Date) -> Bool {
        guard let dueAt else { return false }
        return dueAt <= now
    }
}

/// A worker's hold on an escrow: who, and until when.
public struct Lease: Sendable, Equatable {
    /// The worker id (`worker:<id>` in the audit trail).
    public var owner: String
    public var expiresAt: Date

    public init(owner: String, expiresAt: Date) {
        self.owner = owner
        self.expiresAt = expiresAt
    }
}
