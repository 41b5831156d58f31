public import EscrowCore
import EscrowCrypto
public import Foundation
import GRDB

extension SQLiteEscrowStore {
    public func list(
        _ filter: EscrowFilter,
        after position: EscrowListPosition?,
        limit: Int
    ) async throws -> [EscrowRecord] {
        var conditions: [String] = []
        var arguments: StatementArguments = []
        if let state = filter.effectiveState {
            conditions.append("state = ?")
            arguments += [state.rawValue]
        }
        if let code = filter.deadCode {
            conditions.append("dead_code = ?")
            arguments += [code.rawValue]
        }
        if let version = filter.keyVersion {
            conditions.append("key_version = ?")
            arguments += [Int64(version)]
        }
        if let before = filter.createdAtOrBefore {
            conditions.append("created_at <= ?")
            arguments += [Timestamp.unixMilliseconds(before)]
        }
        if let attempts = filter.minimumAttempts {
            conditions.append("attempts >= ?")
            arguments += [attempts]
        }
        if let position {
            // A row value: SQLite walks the (…, created_at, id) index from the position, whatever the page's depth.
            conditions.append("(created_at, id) > (?, ?)")
            arguments += [position.createdAt, Data(position.id.bytes)]
        }
        let condition = conditions.isEmpty ? "1" : conditions.joined(separator: " AND ")
        // The SQL text depends only on which filters are set (never on their values): a few cached statements.
        let sql = "SELECT \(Self.escrowColumns) FROM escrow WHERE \(condition) ORDER BY created_at, id LIMIT ?"
        arguments += [limit]
        return try await read { [arguments] db in
            // A malformed row is left out of listings (the worker's claim moves it to dead).
            try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments).compactMap {
                try? Self.record(from: $0)
            }
        }
    }

    public func auditCounts(since: Date) async throws -> [AuditCount] {
        let types = AuditCount.countedTypes.map { "'\($0.rawValue)'" }.joined(separator: ", ")
        return try await read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT type, detail, COUNT(*), http_status IS NOT NULL FROM audit_event
                        WHERE at >= ? AND type IN (\(types)) GROUP BY type, detail, http_status IS NOT NULL
                        """
                ),
                arguments: [Timestamp.unixMilliseconds(since)]
            ).map { row in
                AuditCount(
                    type: AuditEventType(rawValue: row[0] ?? ""),
                    detail: row[1],
                    count: row[2] ?? 0,
                    withStatus: row[3] ?? false
                )
            }
        }
    }

    public func lastAuditEvent(of types: [AuditEventType]) async throws -> Date? {
        guard !types.isEmpty else { return nil }
        let placeholders = types.map { _ in "?" }.joined(separator: ", ")
        let arguments = StatementArguments(types.map(\.rawValue))
        return try await read { db in
            // Newest first by sequence: stops at the first match instead of reading the whole trail.
            let at = try Int64.fetchOne(
                db.cachedStatement(
                    sql: "SELECT at FROM audit_event WHERE type IN (\(placeholders)) ORDER BY seq DESC LIMIT 1"
                ),
                arguments: arguments
            )
            return Self.date(at)
        }
    }
}
