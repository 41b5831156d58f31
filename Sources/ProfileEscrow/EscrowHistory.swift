public import EscrowCore
public import EscrowCrypto
public import Foundation

/// One escrow as an operator inspects it: its metadata while it is live, and its audit history (captures,
/// attempts with their statuses, leases, deaths, requeues, the purge). Never plaintext, never a user
/// identifier.
public struct EscrowHistory: Sendable, Equatable, Encodable {
    public var escrowID: EscrowID
    /// Nil once purged: only the audit trail remains.
    public var status: EscrowStatus?
    public var events: [Entry]

    /// One audit event of the escrow.
    public struct Entry: Sendable, Equatable, Encodable {
        public var sequence: Int64
        public var at: Date
        public var type: AuditEventType
        public var detail: String?
        public var httpStatus: Int?
        public var actor: AuditActor
        /// An operator's reason (a requeue or erasure from the console or the admin API).
        public var reason: String?

        init(_ event: AuditEvent) {
            sequence = event.sequence
            at = event.draft.at
            type = event.draft.type
            detail = event.draft.detail
            httpStatus = event.draft.httpStatus
            actor = event.draft.actor
            reason = event.draft.reason
        }

        private enum Keys: String, CodingKey { case sequence, at, type, detail, httpStatus, actor, reason }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(sequence, forKey: .sequence)
            try container.encode(Timestamp.milliseconds(at), forKey: .at)
            try container.encode(type.rawValue, forKey: .type)
            try container.encode(detail, forKey: .detail)
            try container.encode(httpStatus, forKey: .httpStatus)
            try container.encode(actor.rawValue, forKey: .actor)
            try container.encodeIfPresent(reason, forKey: .reason)
        }
    }

    private enum Keys: String, CodingKey { case escrowId, status, events }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(escrowID.hex, forKey: .escrowId)
        try container.encode(status, forKey: .status)
        try container.encode(events, forKey: .events)
    }
}

extension Escrow {
    /// The metadata and audit history of escrow `id` (at most `limit` events, oldest first). Throws
    /// ``EscrowError/Code/notFound`` when the store has neither a row nor an event for it.
    /// A stored row that does not decode is moved to dead (``EscrowError/Code/ciphertextInvalid``), as a read by
    /// its user is.
    public func inspect(id: EscrowID, limit: Int = 10_000) async throws -> EscrowHistory {
        let record = try await idRecord(id, ifMalformed: .quarantine, actor: .library).record
        let events = try await store.auditEvents(escrowID: id.hex, limit: limit)
        guard record != nil || !events.isEmpty else { throw EscrowError(.notFound, "no escrow with this id") }
        return EscrowHistory(
            escrowID: id,
            status: record.map(EscrowStatus.init),
            events: events.map(EscrowHistory.Entry.init)
        )
    }

    /// Live escrows, oldest first, at most `limit`; only those in `state` when given. Reads the whole store
    /// once and keeps the oldest `limit` (memory bounded by `limit`).
    public func list(state: EscrowState? = nil, limit: Int = 1_000) async throws -> [EscrowStatus] {
        let query: RecordQuery = state.map { .state($0) } ?? .all
        var oldest: [EscrowRecord] = []
        var cursor: EscrowID?
        while true {
            let page = try await store.records(query, after: cursor, limit: 500)
            guard let last = page.last else { break }
            cursor = last.id
            oldest += page
            if oldest.count > 2 * limit {
                oldest.sort { ($0.createdAt, $0.id.hex) < ($1.createdAt, $1.id.hex) }
                oldest.removeLast(oldest.count - limit)
            }
        }
        oldest.sort { ($0.createdAt, $0.id.hex) < ($1.createdAt, $1.id.hex) }
        return oldest.prefix(limit).map(EscrowStatus.init)
    }
}
