public import EscrowCrypto
public import Foundation

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

/// What an operator reads: the counts of the purge report and `/metrics`, the admin API's and console's keyset pages,
/// and the trail's counts by type. Reads only, each cheap however large the store is, except ``summary(at:)``.
public protocol OperatorReadStore: Sendable {
    /// The live escrows by state, the oldest ones, how many are past their retention, and every dead escrow (a
    /// quarantined malformed row too, by the hex of its id column). A scan: for the purge report and `status`, never
    /// per request.
    func summary(at now: Date) async throws -> StoreSummary

    /// Live escrows matching `filter`, in (created_at, id) order, after `position`, at most `limit`: a keyset page
    /// that walks an index (one of created_at, state, key version), so a deep page costs what the first does.
    /// Malformed rows are left out.
    func list(_ filter: EscrowFilter, after position: EscrowListPosition?, limit: Int) async throws -> [EscrowRecord]

    /// How many events of ``AuditCount/countedTypes`` the trail holds at or after `since`, by type and detail (a range
    /// of the time index).
    func auditCounts(since: Date) async throws -> [AuditCount]

    /// The time of the newest event of one of `types`; nil when there is none (or `types` is empty).
    func lastAuditEvent(of types: [AuditEventType]) async throws -> Date?
}
