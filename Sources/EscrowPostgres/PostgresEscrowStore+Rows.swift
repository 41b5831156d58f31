import EscrowCore
import EscrowCrypto
import Foundation
import Logging
import PostgresNIO

extension PostgresEscrowStore {
    static func ms(_ date: Date) -> Int64 { Timestamp.unixMilliseconds(date) }
    static func ms(_ date: Date?) -> Int64? { date.map(Timestamp.unixMilliseconds) }
    static func date(_ ms: Int64?) -> Date? { ms.map { Timestamp.date(unixMilliseconds: $0) } }

    /// The columns ``record(from:)`` reads: `row_id` first, then every escrow column.
    static let escrowColumns = (["row_id"] + EscrowColumn.allCases.map(\.rawValue)).joined(separator: ", ")

    /// Decodes a row selected with ``escrowColumns``, by the rules every store shares (``EscrowRecord/decode(_:)``):
    /// every value is checked, so no stored value can trap.
    static func record(from row: PostgresRow) throws(MalformedRow) -> EscrowRecord {
        let cells = row.makeRandomAccess()
        do {
            return try EscrowRecord.decode(StoredRow(cells: cells))
        } catch {
            let rowID = cells.contains("row_id") ? (try? cells["row_id"].decode(Int64.self)) ?? 0 : 0
            throw MalformedRow(rowID: rowID, column: error.column)
        }
    }

    /// A selected row as the store engine sees it: a record, or a malformed row to quarantine.
    static func stored(from row: PostgresRow) -> StoredEscrow {
        do throws(MalformedRow) {
            return .record(try record(from: row))
        } catch {
            return .malformed(error)
        }
    }

    /// A PostgreSQL row's columns: NULL is nil, a value of another type is malformed.
    private struct StoredRow: StoredEscrowRow {
        let cells: PostgresRandomAccessRow

        func value<T: PostgresDecodable>(_ column: String, as type: T.Type) throws(MalformedColumn) -> T? {
            guard cells.contains(column) else { throw MalformedColumn(column) }
            let cell = cells[column]
            guard cell.bytes != nil else { return nil }
            do { return try cell.decode(T.self) } catch { throw MalformedColumn(column) }
        }

        func bytes(_ column: String) throws(MalformedColumn) -> [UInt8]? {
            try value(column, as: Data.self).map { [UInt8]($0) }
        }
        func integer(_ column: String) throws(MalformedColumn) -> Int64? { try value(column, as: Int64.self) }
        func text(_ column: String) throws(MalformedColumn) -> String? { try value(column, as: String.self) }
    }

    /// The live record whose `column` is `value` (`id` or `blind_index`), optionally locked for this transaction.
    static func fetchRow(
        _ connection: PostgresConnection,
        _ column: KeyColumn,
        _ value: [UInt8],
        forUpdate: Bool = false,
        logger: Logger
    ) async throws -> PostgresRow? {
        let lock = forUpdate ? " FOR UPDATE" : ""
        return try await connection.query(
            "SELECT \(unescaped: escrowColumns) FROM escrow WHERE \(unescaped: column.rawValue) = \(Data(value))\(unescaped: lock)",
            logger: logger
        ).collect().first
    }

    enum KeyColumn: String {
        case id
        case blindIndex = "blind_index"
    }

    /// Inserts a row whose user has no live escrow.
    static func insert(_ record: EscrowRecord, _ connection: PostgresConnection, logger: Logger) async throws {
        let columns = EscrowColumn.allCases
        var binds = PostgresBindings(capacity: columns.count)
        for column in columns { try bind(record.storedValue(column), to: &binds) }
        let sql =
            "INSERT INTO escrow (\(columns.map(\.rawValue).joined(separator: ", "))) VALUES ("
            + (1...columns.count).map { "$\($0)" }.joined(separator: ", ") + ")"
        try await connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
    }

    /// Binds one stored value: bytes as `bytea`, integers as `bigint`, text as `text`, absent values as NULL.
    static func bind(_ value: StoredValue, to binds: inout PostgresBindings) throws {
        switch value {
        case .bytes(let bytes): try binds.append(Data(bytes))
        case .integer(let integer): binds.append(integer)
        case .text(let text): binds.append(text)
        }
    }

    /// A column's PostgreSQL type.
    static func type(of column: EscrowColumn) -> String {
        switch column.kind {
        case .bytes: "bytea"
        case .integer: "bigint"
        case .text: "text"
        }
    }

    /// Inserts new escrows in one statement, skipping every one whose user already has a live escrow (or appears
    /// earlier in `records`); returns the ids inserted.
    static func insertNew(
        _ records: [EscrowRecord],
        _ connection: PostgresConnection,
        logger: Logger
    ) async throws -> Set<EscrowID> {
        var inserted: Set<EscrowID> = []
        let columns = ["id", "blind_index", "created_at"] + EscrowColumn.changeable.map(\.rawValue)
        var start = 0
        while start < records.count {
            let chunk = records[start..<min(start + 2_000, records.count)]
            start += chunk.count
            var sql = "INSERT INTO escrow (\(columns.joined(separator: ", "))) VALUES "
            var binds = PostgresBindings(capacity: chunk.count * columns.count)
            for (offset, record) in chunk.enumerated() {
                let first = offset * columns.count
                sql += offset == 0 ? "(" : ", ("
                sql += (1...columns.count).map { "$\(first + $0)" }.joined(separator: ", ") + ")"
                try binds.append(Data(record.sealed.id.bytes))
                try binds.append(Data(record.sealed.blindIndex.bytes))
                binds.append(ms(record.createdAt))
                try bindChangeable(record, to: &binds)
            }
            sql += " ON CONFLICT (blind_index) DO NOTHING RETURNING id"
            let rows = try await connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger).collect()
            for row in rows {
                if let id = EscrowID(bytes: [UInt8](try row.decode(Data.self))) { inserted.insert(id) }
            }
        }
        return inserted
    }

    /// Binds `record`'s values of the changeable columns, in their order.
    static func bindChangeable(_ record: EscrowRecord, to binds: inout PostgresBindings) throws {
        for column in EscrowColumn.changeable { try bind(record.storedValue(column), to: &binds) }
    }

    /// Rewrites each record in place if it is still at its expected revision (compare-and-set), in one statement
    /// per 1,000 records; returns the ids it rewrote. For records of distinct escrows only (a claim's): with two
    /// records of one escrow, which of them PostgreSQL writes is not defined.
    static func update(
        _ records: [(record: EscrowRecord, expectedRevision: Int64)],
        _ connection: PostgresConnection,
        logger: Logger
    ) async throws -> Set<EscrowID> {
        let changeable = EscrowColumn.changeable
        let columns = ["id", "expected"] + changeable.map(\.rawValue)
        // The first row's types name the VALUES list's column types (a NULL there is typed too).
        let types = ["bytea", "bigint"] + changeable.map(type(of:))
        var updated: Set<EscrowID> = []
        var start = 0
        while start < records.count {
            let chunk = records[start..<min(start + 1_000, records.count)]
            start += chunk.count
            var binds = PostgresBindings(capacity: chunk.count * columns.count)
            var values: [String] = []
            for (offset, item) in chunk.enumerated() {
                let first = offset * columns.count
                let placeholders = (1...columns.count).map { column in
                    offset == 0 ? "$\(first + column)::\(types[column - 1])" : "$\(first + column)"
                }
                values.append("(" + placeholders.joined(separator: ", ") + ")")
                try binds.append(Data(item.record.sealed.id.bytes))
                binds.append(item.expectedRevision)
                try bindChangeable(item.record, to: &binds)
            }
            let assignments = columns.dropFirst(2).map { "\($0) = t.\($0)" }.joined(separator: ", ")
            let sql = """
                UPDATE escrow AS e SET \(assignments)
                FROM (VALUES \(values.joined(separator: ", "))) AS t(\(columns.joined(separator: ", ")))
                WHERE e.id = t.id AND e.revision = t.expected RETURNING e.id
                """
            let rows = try await connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger).collect()
            for row in rows {
                if let id = EscrowID(bytes: [UInt8](try row.decode(Data.self))) { updated.insert(id) }
            }
        }
        return updated
    }

    /// Deletes every row that is still at its expected revision, in one statement per 2,000 rows; returns the
    /// `(id, revision)` pairs it deleted. A pair given twice is deleted once and returned once.
    static func delete(
        _ expected: [(id: EscrowID, revision: Int64)],
        _ connection: PostgresConnection,
        logger: Logger
    ) async throws -> [EscrowID: Int64] {
        var deleted: [EscrowID: Int64] = [:]
        var start = 0
        while start < expected.count {
            let chunk = expected[start..<min(start + 2_000, expected.count)]
            start += chunk.count
            var binds = PostgresBindings(capacity: chunk.count * 2)
            var values: [String] = []
            for (offset, pair) in chunk.enumerated() {
                try binds.append(Data(pair.id.bytes))
                binds.append(pair.revision)
                values.append(offset == 0 ? "($1::bytea, $2::bigint)" : "($\(2 * offset + 1), $\(2 * offset + 2))")
            }
            let sql = """
                DELETE FROM escrow AS e USING (VALUES \(values.joined(separator: ", "))) AS t(id, revision)
                WHERE e.id = t.id AND e.revision = t.revision RETURNING e.id, e.revision
                """
            let rows = try await connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger).collect()
            for row in rows {
                let (bytes, revision) = try row.decode((Data, Int64).self)
                if let id = EscrowID(bytes: [UInt8](bytes)) { deleted[id] = revision }
            }
        }
        return deleted
    }

    /// What is known of a malformed row, addressed by `row_id` (its id column may be what is broken); nil when it
    /// is gone. With `forUpdate`, the row is locked for this transaction.
    static func malformed(
        _ rowID: Int64,
        column: String,
        _ connection: PostgresConnection,
        forUpdate: Bool = true,
        logger: Logger
    ) async throws -> MalformedEscrowRow? {
        let dead = EscrowState.dead.rawValue
        let code = DeadCode.ciphertextInvalid.rawValue
        let lock = forUpdate ? " FOR UPDATE" : ""
        let rows = try await connection.query(
            """
            SELECT id, blind_index, revision, state = \(dead) AND dead_code IS NOT DISTINCT FROM \(code)
            FROM escrow WHERE row_id = \(rowID)\(unescaped: lock)
            """,
            logger: logger
        ).collect()
        guard let row = rows.first else { return nil }
        let cells = row.makeRandomAccess()
        return MalformedEscrowRow(
            rowID: rowID,
            column: column,
            idBytes: (try? cells[0].decode(Data?.self))?.map { [UInt8]($0) },
            blindIndexBytes: (try? cells[1].decode(Data?.self))?.map { [UInt8]($0) },
            storedRevision: (try? cells[2].decode(Int64?.self)) ?? nil,
            isQuarantined: ((try? cells[3].decode(Bool?.self)) ?? nil) == true
        )
    }

    static let auditColumns = AuditEvent.storedColumns.joined(separator: ", ")

    static func event(from row: PostgresRow) throws -> AuditEvent {
        let cells = row.makeRandomAccess()
        let draft = AuditDraft(
            type: AuditEventType(rawValue: try cells[2].decode(String.self)),
            at: Timestamp.date(unixMilliseconds: try cells[1].decode(Int64.self)),
            escrowID: try cells[3].decode(String?.self),
            indexPrefix: try cells[4].decode(String?.self),
            detail: try cells[5].decode(String?.self),
            httpStatus: try cells[6].decode(Int64?.self).map { Int(truncatingIfNeeded: $0) },
            actor: AuditActor(rawValue: try cells[7].decode(String.self)),
            ageMilliseconds: try cells[8].decode(Int64?.self),
            reason: try cells[11].decode(String?.self)
        )
        return AuditEvent(
            sequence: try cells[0].decode(Int64.self),
            draft: draft,
            hash: [UInt8](try cells[9].decode(Data.self)),
            // An encoding this version does not know verifies as v1, and so fails verification.
            encoding: AuditEncoding(rawValue: Int(truncatingIfNeeded: try cells[10].decode(Int64.self))) ?? .v1
        )
    }
}
