import EscrowCrypto
public import Foundation

/// A stored escrow row that does not decode into an ``EscrowRecord`` (a wrong length, a value out of range, a state
/// without what it needs): what a store can still tell of it. Such a row is treated like a forged one: quarantined as
/// `dead` (`ciphertext_invalid`) when met, purged on erasure and at retention, never a crash or a stalled worker.
public struct MalformedEscrowRow: Sendable, Equatable {
    /// The store's own address of the row (SQLite's `rowid`, PostgreSQL's `row_id`): its id column may be what is
    /// broken.
    public let rowID: Int64
    /// The first column that breaks a rule.
    public let column: String
    /// The hex of whatever the id column holds (any length), if it holds bytes.
    public let escrowIDHex: String?
    /// The hex of the first 8 bytes of whatever the blind index column holds, if it holds bytes.
    public let indexPrefix: String?
    /// The revision column, when it holds an integer.
    public let storedRevision: Int64?
    /// Whether the row is already marked dead with `ciphertext_invalid`.
    public let isQuarantined: Bool

    package init(
        rowID: Int64,
        column: String,
        idBytes: [UInt8]?,
        blindIndexBytes: [UInt8]?,
        storedRevision: Int64?,
        isQuarantined: Bool
    ) {
        self.rowID = rowID
        self.column = column
        self.escrowIDHex = idBytes.map { Hex.encode($0) }
        self.indexPrefix = blindIndexBytes.map { Hex.encode($0.prefix(8)) }
        self.storedRevision = storedRevision
        self.isQuarantined = isQuarantined
    }
}

/// An event that may change a malformed row.
public enum MalformedRowEvent: Sendable, Equatable {
    /// A claim or a read met the row: it leaves the delivery queue as `dead`.
    case quarantine
    /// The row is deleted for this reason (erasure, retention, a replacing capture, Apple's notification).
    case purge(PurgeReason)
}

/// What a store must do with a malformed row, as ``EscrowLifecycle/handle(_:on:at:actor:)-(MalformedRowEvent,_,_,_)``
/// decided. Only the lifecycle makes one.
public struct MalformedRowAction: Sendable, Equatable {
    public enum Change: Sendable, Equatable {
        /// Set the row to `dead` with `ciphertext_invalid` and take it off the delivery queue (no lease, no
        /// confirmation deadline, not due), with this revision and update time; append these events (none when the
        /// row was already quarantined: the row still leaves the queue).
        case quarantine(revision: Int64, updatedAt: Date, [AuditDraft])
        /// Delete the row and append these events, in one transaction.
        case delete(PurgeReason, [AuditDraft])
    }

    public let change: Change

    init(_ change: Change) {
        self.change = change
    }

    /// The audit events the change appends.
    public var auditDrafts: [AuditDraft] {
        switch change {
        case .quarantine(_, _, let drafts), .delete(_, let drafts): drafts
        }
    }
}

extension EscrowLifecycle {
    /// The one rule for malformed rows. A quarantine bumps the stored revision when it is one a record could hold
    /// (so a worker holding an older revision can no longer change the row), and restarts it at 0 otherwise.
    public func handle(
        _ event: MalformedRowEvent,
        on row: MalformedEscrowRow,
        at now: Date,
        actor: AuditActor
    ) -> MalformedRowAction {
        func draft(_ type: AuditEventType, detail: String) -> AuditDraft {
            AuditDraft(
                type: type,
                at: now,
                escrowID: row.escrowIDHex,
                indexPrefix: row.indexPrefix,
                detail: detail,
                actor: actor
            )
        }
        switch event {
        case .quarantine:
            let revision = row.storedRevision.flatMap { EscrowRecord.storedRevisions.contains($0) ? $0 + 1 : nil } ?? 0
            let clamped = EscrowRecord.storedRevisions.contains(revision) ? revision : 0
            let drafts = row.isQuarantined ? [] : [draft(.dead, detail: DeadCode.ciphertextInvalid.rawValue)]
            return MalformedRowAction(.quarantine(revision: clamped, updatedAt: now, drafts))
        case .purge(let reason):
            return MalformedRowAction(.delete(reason, [draft(.purged, detail: reason.rawValue)]))
        }
    }
}
