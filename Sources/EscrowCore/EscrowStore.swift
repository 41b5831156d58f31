public import EscrowCrypto
public import Foundation

/// What a capture did.
public enum CaptureOutcome: Sendable, Equatable {
    /// A new escrow; nothing was held for this user.
    case created(EscrowRecord)
    /// The same content was already held: nothing changed, the existing escrow is returned.
    case unchanged(EscrowRecord)
    /// A new escrow; the previous one for this user was purged as `replaced`.
    case replaced(EscrowRecord, previous: EscrowID)

    public var record: EscrowRecord {
        switch self {
        case .created(let record), .unchanged(let record), .replaced(let record, _): record
        }
    }
}

/// What a worker asks of ``EscrowStore/claimDue(_:lifecycle:)``.
public struct ClaimRequest: Sendable, Equatable {
    /// Claim what is due at this time.
    public var now: Date
    /// The most escrows to claim.
    public var limit: Int
    /// The worker id the leases are granted to.
    public var owner: String
    /// How long each lease lasts, from `now`.
    public var leaseDuration: Double
    /// Only escrows sealed to one of these master key versions (the ones this worker's keyring can
    /// open): an escrow it could not open is left for a worker that can, without using an attempt.
    /// Nil claims any version.
    public var keyVersions: Set<UInt32>?

    public init(now: Date, limit: Int, owner: String, leaseDuration: Double, keyVersions: Set<UInt32>? = nil) {
        self.now = now
        self.limit = limit
        self.owner = owner
        self.leaseDuration = leaseDuration
        self.keyVersions = keyVersions
    }
}

/// What the purge report counts of one audit event: a capture, or a purge with its reason and age.
public struct AuditTally: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case captured
        case purged(PurgeReason?, ageMilliseconds: Int64)
    }

    public var sequence: Int64
    /// Milliseconds since 1970.
    public var at: Int64
    public var kind: Kind

    public init(sequence: Int64, at: Int64, kind: Kind) {
        self.sequence = sequence
        self.at = at
        self.kind = kind
    }

    /// The tally of a capture or purge event; nil for any other event.
    public init?(_ event: AuditEvent) {
        let at = Timestamp.unixMilliseconds(event.draft.at)
        switch event.draft.type {
        case .captured:
            self.init(sequence: event.sequence, at: at, kind: .captured)
        case .purged:
            let reason = event.draft.detail.flatMap(PurgeReason.init(rawValue:))
            self.init(
                sequence: event.sequence,
                at: at,
                kind: .purged(reason, ageMilliseconds: event.draft.ageMilliseconds ?? 0)
            )
        default:
            return nil
        }
    }
}

extension EscrowStore {
    /// One indexed read of the audit head's single row.
    public func checkReady() async throws { _ = try await auditHead() }

    /// Stores that cannot hold a malformed row have none to purge.
    public func purgeMalformed(expiredAt now: Date, actor: AuditActor) async throws -> Int { 0 }

    /// Stores that cannot hold a malformed row have none to find.
    public func malformedRow(blindIndex: BlindIndex) async throws -> MalformedEscrowRow? { nil }

    /// Stores that cannot hold a malformed row have none to find.
    public func malformedRow(id: EscrowID) async throws -> MalformedEscrowRow? { nil }

    /// Stores that cannot hold a malformed row have none to change.
    public func commit(_ action: MalformedRowAction, on row: MalformedEscrowRow) async throws -> Bool { false }

    public func auditTallies(after sequence: Int64, limit: Int) async throws -> [AuditTally] {
        try await auditEvents(after: sequence, limit: limit).compactMap(AuditTally.init)
    }

    /// The newest checkpoint: the store's chain verifies from it. Nil when nothing was ever archived.
    public func auditCheckpoint() async throws -> AuditCheckpoint? {
        try await auditCheckpoints().last
    }
}

/// Which records to list.
public enum RecordQuery: Sendable, Equatable {
    /// Every live record.
    case all
    /// Records whose retention ran out at `now` (any live state).
    case expired(at: Date)
    /// Records in one state.
    case state(EscrowState)
    /// Records whose escrow key is sealed to another master key version than this one.
    case keyVersionOtherThan(UInt32)
    /// Records due at `at` whose escrow key is sealed to none of these master key versions: the ones a worker
    /// cannot open and does not claim, whose MAC it still checks (the due index keeps it cheap).
    case dueSealedToNoneOf(Set<UInt32>, at: Date)
}

/// Counts for the purge report and metrics.
public struct StoreSummary: Sendable, Equatable {
    public var live: [EscrowState: Int]
    public var oldestLiveCreatedAt: Date?
    public var oldestPendingCreatedAt: Date?
    /// Live escrows past their retention.
    public var overdue: Int
    public var dead: [DeadEscrow]

    public init(
        live: [EscrowState: Int],
        oldestLiveCreatedAt: Date?,
        oldestPendingCreatedAt: Date?,
        overdue: Int,
        dead: [DeadEscrow]
    ) {
        self.live = live
        self.oldestLiveCreatedAt = oldestLiveCreatedAt
        self.oldestPendingCreatedAt = oldestPendingCreatedAt
        self.overdue = overdue
        self.dead = dead
    }
}

/// A dead escrow in a summary: its id and why it died. A quarantined malformed row is listed too, with the hex of
/// whatever its id column holds (which may not be an escrow id at all).
public struct DeadEscrow: Sendable, Equatable {
    /// The hex of the row's id column.
    public var idHex: String
    public var code: DeadCode?

    /// The escrow id, when the row's id column holds one.
    public var id: EscrowID? { EscrowID(hex: idHex) }

    public init(id: EscrowID, code: DeadCode?) {
        self.init(idHex: id.hex, code: code)
    }

    public init(idHex: String, code: DeadCode?) {
        self.idHex = idHex
        self.code = code
    }
}

/// Where escrows live. Sees only sealed bytes; every change and its audit events are one
/// transaction, and a failed audit write fails the change (fail closed).
///
/// The `EscrowStoreConformance` module holds the checks every implementation must pass.
public protocol EscrowStore: Sendable {
    /// Stores a new escrow for its blind index. In the same transaction: when a live escrow with
    /// the same content tag exists, nothing changes (`unchanged`); when one with other content
    /// exists, it is purged with the action `lifecycle` gives for `.replace(by:)` (`replaced`). The
    /// new row's `captured` event is `lifecycle.captured(_:actor:)`. Returns only once the row is durable.
    func capture(_ record: EscrowRecord, actor: AuditActor, lifecycle: EscrowLifecycle) async throws -> CaptureOutcome

    func record(id: EscrowID) async throws -> EscrowRecord?

    /// The live escrow of a user, if any.
    func record(blindIndex: BlindIndex) async throws -> EscrowRecord?

    /// Applies a lifecycle action to the record, if it is still at `expectedRevision`
    /// (compare-and-set: the fencing rule). Returns `false` when the record changed or is gone.
    func commit(_ action: LifecycleAction, id: EscrowID, expectedRevision: Int64) async throws -> Bool

    /// Leases up to `request.limit` escrows due at `request.now` (see `EscrowRecord.isDue(at:)`), oldest
    /// due first, each at most once across all workers, by applying the action `lifecycle` gives for
    /// `.lease(owner:duration:)`. Only escrows sealed to `request.keyVersions` are claimed, when set.
    /// The returned revisions are the fencing tokens.
    func claimDue(_ request: ClaimRequest, lifecycle: EscrowLifecycle) async throws -> [EscrowRecord]

    /// Records matching `query`, ordered by id, after `cursor`, at most `limit`.
    func records(_ query: RecordQuery, after cursor: EscrowID?, limit: Int) async throws -> [EscrowRecord]

    /// How many live escrows have their key sealed to each master key version.
    func keyVersionsInUse() async throws -> [UInt32: Int]

    /// Purges, as `expired`, every stored row past its retention that does not decode into a record (a
    /// quarantined malformed row), with the action ``EscrowLifecycle`` gives for ``MalformedRowEvent/purge(_:)``:
    /// retention holds for them too. Returns how many.
    func purgeMalformed(expiredAt now: Date, actor: AuditActor) async throws -> Int

    /// The user's live row when it does not decode into a record (``record(blindIndex:)`` then throws
    /// ``EscrowStoreError/Code/malformedRow``); nil when none is stored, or when it decodes.
    func malformedRow(blindIndex: BlindIndex) async throws -> MalformedEscrowRow?

    /// The row of escrow `id` when it does not decode into a record (``record(id:)`` then throws
    /// ``EscrowStoreError/Code/malformedRow``); nil when none is stored, or when it decodes. (A row whose id column is
    /// what is broken is found by its user, with ``malformedRow(blindIndex:)``, never by an id.)
    func malformedRow(id: EscrowID) async throws -> MalformedEscrowRow?

    /// Applies what the lifecycle decided for a malformed row, addressed by its row id, with its audit events in
    /// the same transaction. Returns whether the row was still there.
    func commit(_ action: MalformedRowAction, on row: MalformedEscrowRow) async throws -> Bool

    /// Retires master key `version` in one transaction: checks that no live escrow is sealed to it (else
    /// ``EscrowStoreError/Code/keyVersionInUse``), records it, and appends `audit`. From then on the store
    /// refuses every capture and change sealed to it (``EscrowStoreError/Code/keyVersionRetired``), whatever
    /// keyring the writing node holds: no escrow is ever sealed to a key nobody has. Retiring a retired
    /// version again changes nothing and appends nothing.
    func retireKeyVersion(_ version: UInt32, audit: [AuditDraft]) async throws

    /// The master key versions retired so far.
    func retiredKeyVersions() async throws -> Set<UInt32>

    /// The audit events of one escrow (by its id's hex), oldest first, at most `limit`.
    func auditEvents(escrowID: String, limit: Int) async throws -> [AuditEvent]

    /// Appends events that belong to no row change (key management).
    func appendAudit(_ drafts: [AuditDraft]) async throws

    /// Audit events with a sequence number above `sequence`, in order, at most `limit`.
    func auditEvents(after sequence: Int64, limit: Int) async throws -> [AuditEvent]

    /// What the purge report counts of the events with a sequence above `sequence` (captures and purges only;
    /// the cursor is the last one returned), in order, at most `limit`. The default reads
    /// ``auditEvents(after:limit:)``; a store may read just these columns.
    func auditTallies(after sequence: Int64, limit: Int) async throws -> [AuditTally]

    /// The newest event's sequence and hash, as recorded beside the chain.
    func auditHead() async throws -> AuditHead?

    /// The checkpoint of every archive cut, oldest first; empty when nothing was ever archived. The newest one is
    /// where the store's chain starts: its events begin at the sequence after it and chain from its hash.
    func auditCheckpoints() async throws -> [AuditCheckpoint]

    /// Which events a cut before `time` may archive, with ``StoreEngine``'s rule: the longest prefix of the chain
    /// after the newest checkpoint with every event before `time` and none of an escrow that still has a row.
    func planAuditArchive(before time: Date) async throws -> AuditArchivePlan

    /// In one transaction: deletes the events `plan` covers, once written to a durable segment that ends at
    /// `checkpoint`, records the checkpoint, and appends `audit`. Fails, deleting nothing, when another cut moved the
    /// checkpoint meanwhile or an event of the cut now belongs to a live escrow.
    func commitAuditArchive(_ plan: AuditArchivePlan, checkpoint: AuditCheckpoint, audit: [AuditDraft]) async throws

    func summary(at now: Date) async throws -> StoreSummary

    /// Live escrows matching `filter`, in (created_at, id) order, after `position`, at most `limit`: a keyset page
    /// that walks an index (one of created_at, state, key version), so a deep page costs what the first does.
    func list(_ filter: EscrowFilter, after position: EscrowListPosition?, limit: Int) async throws -> [EscrowRecord]

    /// How many events of ``AuditCount/countedTypes`` the trail holds at or after `since`, by type and detail (a range
    /// of the time index).
    func auditCounts(since: Date) async throws -> [AuditCount]

    /// The time of the newest event of one of `types`; nil when there is none.
    func lastAuditEvent(of types: [AuditEventType]) async throws -> Date?

    /// Makes purged bytes unrecoverable from the store's files (SQLite: a WAL checkpoint
    /// that truncates the log). A no-op where the backend has no such copies to clear.
    func flushPurged() async throws

    /// Throws when the store cannot take a capture now: it does not answer, it stopped writing after a disk error,
    /// or it reaches a server that accepts no writes (a standby). For `/readyz`; cheap however large the store is.
    func checkReady() async throws
}
