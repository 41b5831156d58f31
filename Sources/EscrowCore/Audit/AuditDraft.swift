public import Foundation

/// An audit event before the store gives it a sequence number and a chain hash.
///
/// Holds no user identifier, name or email: only the random escrow id, the first 8 bytes of the
/// blind index, a reason or code, an HTTP status and the actor.
public struct AuditDraft: Sendable, Equatable {
    public var type: AuditEventType
    public var at: Date
    public var escrowID: String?
    public var indexPrefix: String?
    /// The purge reason, dead code, delivery outcome, or key version, depending on `type`.
    public var detail: String?
    public var httpStatus: Int?
    public var actor: AuditActor
    /// For `purged`: milliseconds from capture to purge (feeds the purge report).
    public var ageMilliseconds: Int64?
    /// An operator's reason for a requeue or erasure (``OperatorReason``: bounded, no control characters, never
    /// personal data by contract); nil for every other event. Hashed only by the ``AuditEncoding/v3`` encoding.
    public var reason: String?

    public init(
        type: AuditEventType,
        at: Date,
        escrowID: String? = nil,
        indexPrefix: String? = nil,
        detail: String? = nil,
        httpStatus: Int? = nil,
        actor: AuditActor,
        ageMilliseconds: Int64? = nil,
        reason: String? = nil
    ) {
        self.type = type
        self.at = at
        self.escrowID = escrowID
        self.indexPrefix = indexPrefix
        self.detail = detail
        self.httpStatus = httpStatus
        self.actor = actor
        self.ageMilliseconds = ageMilliseconds
        self.reason = reason
    }
}
