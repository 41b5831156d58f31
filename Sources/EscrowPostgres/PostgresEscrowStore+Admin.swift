public import EscrowCore
import EscrowCrypto
public import Foundation
import PostgresNIO

extension PostgresEscrowStore {
    public func list(
        _ filter: EscrowFilter,
        after position: EscrowListPosition?,
        limit: Int
    ) async throws -> [EscrowRecord] {
        var binds = PostgresBindings()
        var conditions: [String] = []
        // Each value is a bind parameter: only the shape of the SQL depends on which filters are set.
        func bind(_ condition: (String) -> String, _ value: some PostgresThrowingDynamicTypeEncodable) throws {
            try binds.append(value)
            conditions.append(condition("$\(binds.count)"))
        }
        if let state = filter.effectiveState { try bind({ "state = \($0)" }, state.rawValue) }
        if let code = filter.deadCode { try bind({ "dead_code = \($0)" }, code.rawValue) }
        if let version = filter.keyVersion { try bind({ "key_version = \($0)" }, Int64(version)) }
        if let before = filter.createdAtOrBefore { try bind({ "created_at <= \($0)" }, Self.ms(before)) }
        if let attempts = filter.minimumAttempts { try bind({ "attempts >= \($0)" }, Int64(attempts)) }
        if let position {
            // A row comparison: PostgreSQL walks the (…, created_at, id) index from the position.
            binds.append(position.createdAt)
            try binds.append(Data(position.id.bytes))
            conditions.append("(created_at, id) > ($\(binds.count - 1), $\(binds.count))")
        }
        binds.append(Int64(limit))
        let condition = conditions.isEmpty ? "TRUE" : conditions.joined(separator: " AND ")
        let sql = PostgresQuery(
            unsafeSQL: """
                SELECT \(Self.escrowColumns) FROM escrow WHERE \(condition)
                ORDER BY created_at, id LIMIT $\(binds.count)
                """,
            binds: binds
        )
        // A malformed row is left out of listings (the worker's claim moves it to dead).
        return try await database.rows("read failed", sql).compactMap { try? Self.record(from: $0) }
    }

    public func auditCounts(since: Date) async throws -> [AuditCount] {
        let types = AuditCount.countedTypes.map(\.rawValue)
        let rows = try await database.rows(
            "read failed",
            """
            SELECT type, detail, COUNT(*), http_status IS NOT NULL FROM audit_event
            WHERE at >= \(Self.ms(since)) AND type = ANY(\(types)) GROUP BY type, detail, http_status IS NOT NULL
            """
        )
        return try rows.map { row in
            let (type, detail, count, withStatus) = try decode(row, (String, String?, Int64, Bool).self)
            return AuditCount(
                type: AuditEventType(rawValue: type),
                detail: detail,
                count: Int(count),
                withStatus: withStatus
            )
        }
    }

    public func lastAuditEvent(of types: [AuditEventType]) async throws -> Date? {
        guard !types.isEmpty else { return nil }
        let rows = try await database.rows(
            "read failed",
            """
            SELECT at FROM audit_event WHERE type = ANY(\(types.map(\.rawValue))) ORDER BY seq DESC LIMIT 1
            """
        )
        return try rows.first.map { Timestamp.date(unixMilliseconds: try decode($0, Int64.self)) }
    }
}
