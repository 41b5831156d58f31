public import Foundation

/// The kinds of audit events (SPEC §6, normative names). A struct, not an enum, so that a stored
/// event with a type this version does not know still reads back (and fails chain verification
/// if it was tampered with) instead of failing to decode.
public struct AuditEventType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    public static let captured = AuditEventType(rawValue: "captured")
    public static let replaced = AuditEventType(rawValue: "replaced")
    public static let deliveryAttempted = AuditEventType(rawValue: "delivery-attempted")
    public static let awaitingConfirmation = AuditEventType(rawValue: "awaiting-confirmation")
    public static let confirmed = AuditEventType(rawValue: "confirmed")
    public static let purged = AuditEventType(rawValue: "purged")
    public static let dead = AuditEventType(rawValue: "dead")
    public static let requeued = AuditEventType(rawValue: "requeued")
    /// The sealed profile was changed in place (an Apple email-disabled/enabled notification).
    public static let updated = AuditEventType(rawValue: "updated")
    public static let keysRotated = AuditEventType(rawValue: "keys-rotated")
    public static let keysRewrapped = AuditEventType(rawValue: "keys-rewrapped")
    public static let keysRetired = AuditEventType(rawValue: "keys-retired")
}

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

    public init(
        type: AuditEventType,
        at: Date,
        escrowID: String? = nil,
        indexPrefix: String? = nil,
        detail: String? = nil,
        httpStatus: Int? = nil,
        actor: AuditActor,
        ageMilliseconds: Int64? = nil
    ) {
        self.type = type
        self.at = at
        self.escrowID = escrowID
        self.indexPrefix = indexPrefix
        self.detail = detail
        self.httpStatus = httpStatus
        self.actor = actor
        self.ageMilliseconds = ageMilliseconds
    }
}

/// A stored audit event: a draft plus its sequence number and chain hash.
public struct AuditEvent: Sendable, Equatable {
    public var sequence: Int64
    public var draft: AuditDraft
    /// `BLAKE2b-256(previous hash || canonical event)`, see ``AuditChain``.
    public var hash: [UInt8]

    public init(sequence: Int64, draft: AuditDraft, hash: [UInt8]) {
        self.sequence = sequence
        self.draft = draft
        self.hash = hash
    }
}
