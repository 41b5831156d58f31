internal import EscrowCrypto
package import Foundation

/// What the store records of one archive cut, in the transaction that deletes its events: the sequence and hash of
/// the last archived event (the point the store's chain now verifies from), and what the cut held.
public struct AuditCheckpoint: Sendable, Equatable {
    /// The last archived event's sequence.
    public var sequence: Int64
    /// The last archived event's hash.
    public var hash: [UInt8]
    /// The cut's first event's sequence.
    public var firstSequence: Int64
    public var eventCount: Int64
    /// The earliest and latest event times (milliseconds since 1970) in the cut.
    public var earliestAt: Int64
    public var latestAt: Int64
    /// When the cut was made (milliseconds since 1970).
    public var archivedAt: Int64

    public init(
        sequence: Int64,
        hash: [UInt8],
        firstSequence: Int64,
        eventCount: Int64,
        earliestAt: Int64,
        latestAt: Int64,
        archivedAt: Int64
    ) {
        self.sequence = sequence
        self.hash = hash
        self.firstSequence = firstSequence
        self.eventCount = eventCount
        self.earliestAt = earliestAt
        self.latestAt = latestAt
        self.archivedAt = archivedAt
    }

    /// The sequence and hash the store's chain continues from.
    public var head: AuditHead { AuditHead(sequence: sequence, hash: hash) }
}

/// Which events a cut before a time may archive: always a prefix of the chain (``StoreEngine/planAuditArchive(before:in:)``).
public struct AuditArchivePlan: Sendable, Equatable {
    /// Why the prefix ends where it does.
    public enum Limit: String, Sendable, Equatable {
        /// The next event is at or after the cut's time.
        case time
        /// The next event belongs to an escrow that still has a row: it and everything after it stay.
        case liveEscrow = "live-escrow"
        /// The chain's head: every event is before the time and of no live escrow.
        case head
        /// There is no event after the last checkpoint.
        case empty
    }

    /// The newest checkpoint, which this cut continues; nil before the first cut.
    public var previous: AuditCheckpoint?
    /// The last sequence to archive; nothing is archived when it is not above ``firstSequence`` - 1.
    public var lastSequence: Int64
    public var limit: Limit
    /// Set on the later transactions of a cut: the first one checked every event of the cut against the live escrows
    /// (an escrow id is never used again, so a cut's events cannot become a live escrow's later).
    public var liveEscrowsChecked = false

    public init(previous: AuditCheckpoint?, lastSequence: Int64, limit: Limit) {
        self.previous = previous
        self.lastSequence = lastSequence
        self.limit = limit
    }

    /// The sequence after the previous checkpoint.
    public var firstSequence: Int64 { (previous?.sequence ?? 0) + 1 }
    public var isEmpty: Bool { lastSequence < firstSequence }
    /// The hash the cut's first event chains from: the previous checkpoint's, or the genesis.
    public var previousHash: [UInt8] { previous?.hash ?? AuditChain.genesis }
}

extension AuditEventType {
    /// A cut of the chain was archived and deleted; `detail` is `<first>-<last>:<hash of last>`.
    public static let auditArchived = AuditEventType(rawValue: "audit-archived")
}

extension StoreEngine {
    /// The longest prefix of the chain after the last checkpoint that may be archived at `time`: it stops before the
    /// first event at or after `time`, and before the first event of an escrow that still has a row (a live escrow's
    /// history stays in the store until it is purged). A prefix, so that the store's chain stays one chain that
    /// verifies from the checkpoint: cutting an event out of the middle would break every hash after it.
    ///
    /// The head is read first: every event up to it is committed, and an escrow created after that has only later
    /// events, so the live-escrow limit read next covers every event the cut may take.
    package static func planAuditArchive(
        before time: Date,
        in transaction: some EscrowWriteTransaction
    ) async throws -> AuditArchivePlan {
        let previous = try await transaction.auditCheckpoint()
        let after = previous?.sequence ?? 0
        guard let head = try await transaction.auditHead(), head.sequence > after else {
            return AuditArchivePlan(previous: previous, lastSequence: after, limit: .empty)
        }
        var last = head.sequence
        var limit = AuditArchivePlan.Limit.head
        let beforeTime = try await transaction.firstAuditSequence(
            after: after,
            atOrAfter: Timestamp.unixMilliseconds(time)
        )
        if let beforeTime, beforeTime - 1 < last {
            last = beforeTime - 1
            limit = .time
        }
        if let live = try await transaction.firstLiveEscrowAuditSequence(after: after), live - 1 < last {
            last = live - 1
            limit = .liveEscrow
        }
        return AuditArchivePlan(previous: previous, lastSequence: last, limit: limit)
    }

    /// Deletes the events a cut archived and records its checkpoint, with `audit` (the cut's own event), in the
    /// caller's transaction: only when the store still continues from the plan's checkpoint, no event of the cut
    /// belongs to a live escrow, and the cut's last event is still the one written to the segment.
    package static func commitAuditArchive(
        _ plan: AuditArchivePlan,
        checkpoint: AuditCheckpoint,
        audit: [AuditDraft],
        in transaction: some EscrowWriteTransaction
    ) async throws {
        let current = try await transaction.auditCheckpoint()
        guard current?.sequence == plan.previous?.sequence else {
            throw EscrowStoreError(
                .failed,
                "another archive moved the checkpoint to sequence \(current?.sequence ?? 0) meanwhile; "
                    + "nothing was deleted: run the archive again"
            )
        }
        guard checkpoint.firstSequence == plan.firstSequence, checkpoint.sequence >= checkpoint.firstSequence,
            checkpoint.sequence <= plan.lastSequence
        else {
            throw EscrowStoreError(.failed, "the archive's checkpoint does not continue the store's")
        }
        // The whole cut (up to the plan's last sequence, which may be past this transaction's checkpoint), once.
        if !plan.liveEscrowsChecked,
            let live = try await transaction.firstLiveEscrowAuditSequence(after: plan.firstSequence - 1),
            live <= max(checkpoint.sequence, plan.lastSequence)
        {
            throw EscrowStoreError(
                .failed,
                "the event at sequence \(live) now belongs to a live escrow; nothing was deleted: run the archive again"
            )
        }
        guard let stored = try await transaction.auditHash(at: checkpoint.sequence),
            Hashing.constantTimeEqual(stored, checkpoint.hash)
        else {
            throw EscrowStoreError(
                .failed,
                "the store's event at sequence \(checkpoint.sequence) is not the one archived; nothing was deleted"
            )
        }
        let deleted = try await transaction.deleteAudit(checkpoint.firstSequence...checkpoint.sequence)
        guard deleted == checkpoint.eventCount else {
            throw EscrowStoreError(
                .failed,
                "the store holds \(deleted) events in sequences \(checkpoint.firstSequence)-\(checkpoint.sequence), "
                    + "the segment \(checkpoint.eventCount); nothing was deleted"
            )
        }
        try await transaction.insertCheckpoint(checkpoint)
        try await append(audit, transaction)
    }
}
