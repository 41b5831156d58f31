public import EscrowCrypto
public import Foundation

/// Which live escrows an operator lists or requeues (the admin API, the console): every member optional, all given
/// ones must hold.
public struct EscrowFilter: Sendable, Equatable {
    public var state: EscrowState?
    /// Only escrows created at or before this time (an age of at least `now - createdAtOrBefore`).
    public var createdAtOrBefore: Date?
    public var keyVersion: UInt32?
    /// Only dead escrows with this code.
    public var deadCode: DeadCode?
    /// Only escrows with at least this many delivery attempts.
    public var minimumAttempts: Int?

    public init(
        state: EscrowState? = nil,
        createdAtOrBefore: Date? = nil,
        keyVersion: UInt32? = nil,
        deadCode: DeadCode? = nil,
        minimumAttempts: Int? = nil
    ) {
        self.state = state
        self.createdAtOrBefore = createdAtOrBefore
        self.keyVersion = keyVersion
        self.deadCode = deadCode
        self.minimumAttempts = minimumAttempts
    }

    /// The state the rows must be in: `state`, or `dead` when only a dead code is given (so a store walks the index
    /// of one state).
    public var effectiveState: EscrowState? {
        state ?? (deadCode != nil ? .dead : nil)
    }
}

/// Where a keyset page of ``OperatorReadStore/list(_:after:limit:)`` resumes: after the escrow created at `createdAt`
/// (milliseconds since 1970) with this id, in (created_at, id) order.
public struct EscrowListPosition: Sendable, Hashable {
    public var createdAt: Int64
    public var id: EscrowID

    public init(createdAt: Int64, id: EscrowID) {
        self.createdAt = createdAt
        self.id = id
    }

    /// The position of `record`: the next page starts after it.
    public init(after record: EscrowRecord) {
        self.init(createdAt: Timestamp.unixMilliseconds(record.createdAt), id: record.id)
    }
}

/// How many audit events of one type (and detail: a delivery's outcome, a purge's reason, a dead code) a window of the
/// trail holds.
public struct AuditCount: Sendable, Hashable {
    public var type: AuditEventType
    public var detail: String?
    public var count: Int
    /// Whether these events carry an HTTP status: a `purged` (confirmed) with one is a delivery the backend
    /// confirmed, which is counted as a delivery too.
    public var withStatus: Bool

    public init(type: AuditEventType, detail: String?, count: Int, withStatus: Bool = false) {
        self.type = type
        self.detail = detail
        self.count = count
        self.withStatus = withStatus
    }

    /// The event types an overview counts.
    public static let countedTypes: [AuditEventType] = [.captured, .deliveryAttempted, .purged, .dead, .requeued]
    /// The event types of a key cycle.
    public static let keyTypes: [AuditEventType] = [.keysRotated, .keysRewrapped, .keysRetired]
}
