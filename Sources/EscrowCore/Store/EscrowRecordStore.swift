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

/// What a worker asks of ``EscrowRecordStore/claimDue(_:lifecycle:)``.
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

/// The escrows themselves: one row a live escrow, changed only as ``EscrowLifecycle`` decides, each change and its audit
/// events one transaction (a failed audit write fails the change). What `Escrow` captures, reads back, commits and
/// leases to the replay worker.
///
/// A store never decides how an escrow changes: it is handed the lifecycle (``capture(_:actor:lifecycle:)``,
/// ``claimDue(_:lifecycle:)``) or an action the lifecycle made (``commit(_:id:expectedRevision:)``), and applies it.
/// `StoreEngine` (package-internal) writes those decisions once over a store's statements.
public protocol EscrowRecordStore: Sendable {
    /// Stores a new escrow for its blind index. In the same transaction: when a live escrow with the same content tag
    /// exists, nothing changes (`unchanged`); when one with other content exists, it is purged with the action
    /// `lifecycle` gives for `.replace(by:)` (`replaced`); a malformed live row of the user is purged as `replaced`
    /// too. The new row's `captured` event is `lifecycle.captured(_:actor:)`. Returns only once the row is durable.
    func capture(_ record: EscrowRecord, actor: AuditActor, lifecycle: EscrowLifecycle) async throws -> CaptureOutcome

    /// Escrow `id`, in any live state; nil when none is stored. Throws ``EscrowStoreError/Code/malformedRow`` when the
    /// row does not decode (``MalformedRowStore/malformedRow(id:)`` then tells what it is).
    func record(id: EscrowID) async throws -> EscrowRecord?

    /// The live escrow of a user, if any. Throws ``EscrowStoreError/Code/malformedRow`` when the row does not decode
    /// (``MalformedRowStore/malformedRow(blindIndex:)`` then tells what it is).
    func record(blindIndex: BlindIndex) async throws -> EscrowRecord?

    /// Applies a lifecycle action to the record, if it is still at `expectedRevision` (compare-and-set: the fencing
    /// rule), with the action's audit events in the same transaction. Returns `false` when the record changed or is
    /// gone, or the action is `ignore`.
    func commit(_ action: LifecycleAction, id: EscrowID, expectedRevision: Int64) async throws -> Bool

    /// Leases up to `request.limit` escrows due at `request.now` (see `EscrowRecord.isDue(at:)`), oldest due first,
    /// each at most once across all workers, by applying the action `lifecycle` gives for `.lease(owner:duration:)`.
    /// Only escrows sealed to `request.keyVersions` are claimed, when set. A malformed row met on the way is
    /// quarantined through `lifecycle` and takes no lease. The returned revisions are the fencing tokens.
    func claimDue(_ request: ClaimRequest, lifecycle: EscrowLifecycle) async throws -> [EscrowRecord]

    /// Records matching `query`, ordered by id, after `cursor`, at most `limit`. Malformed rows are left out (a claim
    /// or a read by id or user meets them).
    func records(_ query: RecordQuery, after cursor: EscrowID?, limit: Int) async throws -> [EscrowRecord]

    /// Makes purged bytes unrecoverable from the store's files (SQLite: a WAL checkpoint that truncates the log).
    /// A store whose backend keeps no such copies implements it as nothing, and says so.
    func flushPurged() async throws

    /// Throws when the store cannot take a capture now: it does not answer, it stopped writing after a disk error,
    /// or it reaches a server that accepts no writes (a standby). For `/readyz`; cheap however large the store is.
    func checkReady() async throws
}
