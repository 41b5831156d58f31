public import Foundation

/// What the purge report counts of one audit event: a capture, a purge with its reason and age, or the end of an
/// Apple token revocation.
public struct AuditTally: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case captured
        case purged(PurgeReason?, ageMilliseconds: Int64)
        /// An `apple-token-revoked` (`true`) or `apple-revocation-failed` (`false`) event.
        case appleRevocation(revoked: Bool)

        /// The kind of a stored event's type and columns; nil for a type the report does not count.
        public init?(type: String, detail: String?, ageMilliseconds: Int64?) {
            switch AuditEventType(rawValue: type) {
            case .captured: self = .captured
            case .purged:
                self = .purged(detail.flatMap(PurgeReason.init(rawValue:)), ageMilliseconds: ageMilliseconds ?? 0)
            case .appleTokenRevoked: self = .appleRevocation(revoked: true)
            case .appleRevocationFailed: self = .appleRevocation(revoked: false)
            default: return nil
            }
        }

        /// The event types counted.
        public static let countedTypes: [AuditEventType] = [
            .captured, .purged, .appleTokenRevoked, .appleRevocationFailed,
        ]

        /// ``countedTypes`` quoted for a store's `type IN (…)`: constants, never input.
        public static let countedTypesSQL = countedTypes.map { "'\($0.rawValue)'" }.joined(separator: ", ")
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

    /// The tally of an event the report counts; nil for any other event.
    public init?(_ event: AuditEvent) {
        guard
            let kind = Kind(
                type: event.draft.type.rawValue,
                detail: event.draft.detail,
                ageMilliseconds: event.draft.ageMilliseconds
            )
        else { return nil }
        self.init(sequence: event.sequence, at: Timestamp.unixMilliseconds(event.draft.at), kind: kind)
    }
}

/// The audit trail: a hash chain of every event, appended in the transaction of the change it records, read back in
/// order, and cut into archive segments (a cut deletes a verified prefix and records its checkpoint, so the chain
/// still verifies from there).
public protocol AuditTrailStore: Sendable {
    /// Appends events that belong to no row change (key management), chained after the head in one transaction.
    func appendAudit(_ drafts: [AuditDraft]) async throws

    /// The audit events of one escrow (by its id's hex), oldest first, at most `limit`.
    func auditEvents(escrowID: String, limit: Int) async throws -> [AuditEvent]

    /// Audit events with a sequence number above `sequence`, in order, at most `limit`.
    func auditEvents(after sequence: Int64, limit: Int) async throws -> [AuditEvent]

    /// What the purge report counts of the events with a sequence above `sequence` (the types of
    /// ``AuditTally/Kind/countedTypes`` only; the cursor is the last one returned), in order, at most `limit`. A store reads just these columns; one that
    /// cannot may map ``auditEvents(after:limit:)`` through ``AuditTally/init(_:)``, paging until it has `limit`
    /// tallies or the trail ends.
    func auditTallies(after sequence: Int64, limit: Int) async throws -> [AuditTally]

    /// The newest event's sequence and hash, as recorded beside the chain; nil before the first event.
    func auditHead() async throws -> AuditHead?

    /// The checkpoint of every archive cut, oldest first; empty when nothing was ever archived. The newest one is
    /// where the store's chain starts: its events begin at the sequence after it and chain from its hash.
    func auditCheckpoints() async throws -> [AuditCheckpoint]

    /// Which events a cut before `time` may archive, with `StoreEngine`'s rule: the longest prefix of the chain after
    /// the newest checkpoint with every event before `time` and none of an escrow that still has a row.
    func planAuditArchive(before time: Date) async throws -> AuditArchivePlan

    /// In one transaction: deletes the events `plan` covers, once written to a durable segment that ends at
    /// `checkpoint`, records the checkpoint, and appends `audit`. Fails, deleting nothing, when another cut moved the
    /// checkpoint meanwhile or an event of the cut now belongs to a live escrow.
    func commitAuditArchive(_ plan: AuditArchivePlan, checkpoint: AuditCheckpoint, audit: [AuditDraft]) async throws
}

extension AuditTrailStore {
    /// The newest checkpoint: the store's chain verifies from it. Nil when nothing was ever archived. Shared by every
    /// store: the last of ``auditCheckpoints()``.
    public func auditCheckpoint() async throws -> AuditCheckpoint? {
        try await auditCheckpoints().last
    }
}
