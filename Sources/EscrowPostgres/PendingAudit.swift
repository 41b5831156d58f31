import EscrowCore
import Foundation
import Logging
import PostgresNIO

/// The audit events one transaction appends, gathered while it changes rows and written at its end.
///
/// One chain for every node: ``write(_:logger:)`` locks the head row (`SELECT … FOR UPDATE`), so appending
/// transactions serialize on it and each one continues the chain where the last committed one left it, with no
/// gap or fork. The lock is taken last, after the transaction's row changes, and held only for the event inserts
/// and the COMMIT; a transaction that holds it never waits for an escrow row.
struct PendingAudit {
    private(set) var drafts: [AuditDraft] = []

    mutating func add(_ more: [AuditDraft]) {
        drafts += more
    }

    /// The most events in one INSERT (ten parameters each; PostgreSQL allows 65,535 per statement).
    static let rowsPerInsert = 1_000

    /// Appends the gathered events to the chain and records the new head, inside the caller's transaction.
    func write(_ connection: PostgresConnection, logger: Logger) async throws {
        guard !drafts.isEmpty else { return }
        var head = try await Self.lockHead(connection, logger: logger)
        var index = 0
        while index < drafts.count {
            let chunk = drafts[index..<min(index + Self.rowsPerInsert, drafts.count)]
            index += chunk.count
            var sql = "INSERT INTO audit_event (seq, at, type, escrow_id, index_prefix, detail, http_status, actor, "
            sql += "age_ms, hash) VALUES "
            var binds = PostgresBindings(capacity: chunk.count * 10)
            for (offset, draft) in chunk.enumerated() {
                let sequence = head.sequence + 1
                let hash = AuditChain.hash(previous: head.hash, sequence: sequence, draft: draft)
                let first = offset * 10
                sql += offset == 0 ? "(" : ", ("
                sql += (1...10).map { "$\(first + $0)" }.joined(separator: ", ") + ")"
                binds.append(sequence)
                binds.append(Timestamp.unixMilliseconds(draft.at))
                binds.append(draft.type.rawValue)
                binds.append(draft.escrowID)
                binds.append(draft.indexPrefix)
                binds.append(draft.detail)
                binds.append(draft.httpStatus.map { Int64($0) })
                binds.append(draft.actor.rawValue)
                binds.append(draft.ageMilliseconds)
                try binds.append(Data(hash))
                head = AuditHead(sequence: sequence, hash: hash)
            }
            try await connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        }
        try await connection.query(
            "UPDATE audit_head SET seq = \(head.sequence), hash = \(Data(head.hash)) WHERE singleton = 1",
            logger: logger
        )
    }

    /// Locks the chain's head row for this transaction, creating it (at the genesis) when this is the first event
    /// ever: two transactions creating it at once both succeed, one of them inserting and the other waiting, then
    /// locking the row the first made.
    static func lockHead(_ connection: PostgresConnection, logger: Logger) async throws -> AuditHead {
        for _ in 0..<2 {
            let rows = try await connection.query(
                "SELECT seq, hash FROM audit_head WHERE singleton = 1 FOR UPDATE",
                logger: logger
            ).collect().map { try $0.decode((Int64, Data).self) }
            if let (sequence, hash) = rows.first { return AuditHead(sequence: sequence, hash: [UInt8](hash)) }
            try await connection.query(
                """
                INSERT INTO audit_head (singleton, seq, hash) VALUES (1, 0, \(Data(AuditChain.genesis)))
                ON CONFLICT (singleton) DO NOTHING
                """,
                logger: logger
            )
        }
        throw EscrowStoreError(.failed, "the audit chain's head row cannot be locked")
    }
}
