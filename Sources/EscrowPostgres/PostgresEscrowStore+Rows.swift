import EscrowCore
import EscrowCrypto
import Foundation
import Logging
import PostgresNIO

extension PostgresEscrowStore {
    static func ms(_ date: Date) -> Int64 { Timestamp.unixMilliseconds(date) }
    static func ms(_ date: Date?) -> Int64? { date.map(Timestamp.unixMilliseconds) }
    static func date(_ ms: Int64?) -> Date? { ms.map { Timestamp.date(unixMilliseconds: $0) } }

    /// The columns ``record(from:)`` reads, in this order: `row_id` first.
    static let escrowColumns = """
        row_id, id, blind_index, key_version, public_key, sealed_profile, sealed_key, mac, content_tag, state, \
        revision, attempts, next_attempt_at, lease_owner, lease_expires_at, confirm_deadline, created_at, \
        expires_at, updated_at, dead_code, last_status
        """

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

    /// Inserts a row. With `ifNoLiveEscrow`, a row whose blind index is already live is not inserted
    /// (`ON CONFLICT DO NOTHING`: it waits for a concurrent insert of the same user to commit or roll back) and
    /// the result is false.
    @discardableResult
    static func insert(
        _ record: EscrowRecord,
        _ connection: PostgresConnection,
        ifNoLiveEscrow: Bool = false,
        logger: Logger
    ) async throws -> Bool {
        let conflict = ifNoLiveEscrow ? "ON CONFLICT (blind_index) DO NOTHING" : ""
        let sealed = record.sealed
        let rows = try await connection.query(
            """
            INSERT INTO escrow (id, blind_index, key_version, public_key, sealed_profile, sealed_key, mac,
                content_tag, state, revision, attempts, next_attempt_at, lease_owner, lease_expires_at,
                confirm_deadline, due_at, created_at, expires_at, updated_at, dead_code, last_status)
            VALUES (\(Data(sealed.id.bytes)), \(Data(sealed.blindIndex.bytes)), \(Int64(sealed.keyVersion)),
                \(Data(sealed.publicKey)), \(Data(sealed.sealedProfile)), \(Data(sealed.sealedKey)), \(Data(sealed.mac)),
                \(Data(record.contentTag)), \(record.state.rawValue), \(record.revision), \(Int64(record.attempts)),
                \(ms(record.nextAttemptAt)), \(record.leaseOwner), \(ms(record.leaseExpiresAt)),
                \(ms(record.confirmDeadline)), \(ms(record.dueAt)), \(ms(record.createdAt)), \(ms(record.expiresAt)),
                \(ms(record.updatedAt)), \(record.deadCode?.rawValue), \(record.lastStatus.map { Int64($0) }))
            \(unescaped: conflict) RETURNING 1
            """,
            logger: logger
        ).collect()
        return rows.count == 1
    }

    /// Inserts new escrows in one statement, skipping every one whose user already has a live escrow (or appears
    /// earlier in `records`); returns the ids inserted.
    static func insertNew(
        _ records: [EscrowRecord],
        _ connection: PostgresConnection,
        logger: Logger
    ) async throws -> Set<EscrowID> {
        var inserted: Set<EscrowID> = []
        let columns = ["id", "blind_index", "created_at"] + changeableColumns.map(\.name)
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

    /// Rewrites a record in place if it is still at `expectedRevision` (compare-and-set); returns whether it was.
    static func update(
        _ record: EscrowRecord,
        expectedRevision: Int64,
        _ connection: PostgresConnection,
        logger: Logger
    ) async throws -> Bool {
        try await update([(record, expectedRevision)], connection, logger: logger).contains(record.id)
    }

    /// The columns a change of an escrow rewrites (all but `id`, `blind_index` and `created_at`) with their types,
    /// in the order ``bindChangeable(_:to:)`` binds them.
    static let changeableColumns: [(name: String, type: String)] = [
        ("key_version", "bigint"), ("public_key", "bytea"), ("sealed_profile", "bytea"), ("sealed_key", "bytea"),
        ("mac", "bytea"), ("content_tag", "bytea"), ("state", "text"), ("revision", "bigint"), ("attempts", "bigint"),
        ("next_attempt_at", "bigint"), ("lease_owner", "text"), ("lease_expires_at", "bigint"),
        ("confirm_deadline", "bigint"), ("due_at", "bigint"), ("expires_at", "bigint"), ("updated_at", "bigint"),
        ("dead_code", "text"), ("last_status", "bigint"),
    ]

    /// Binds `record`'s values of ``changeableColumns``, in their order.
    static func bindChangeable(_ record: EscrowRecord, to binds: inout PostgresBindings) throws {
        let sealed = record.sealed
        binds.append(Int64(sealed.keyVersion))
        try binds.append(Data(sealed.publicKey))
        try binds.append(Data(sealed.sealedProfile))
        try binds.append(Data(sealed.sealedKey))
        try binds.append(Data(sealed.mac))
        try binds.append(Data(record.contentTag))
        binds.append(record.state.rawValue)
        binds.append(record.revision)
        binds.append(Int64(record.attempts))
        binds.append(ms(record.nextAttemptAt))
        binds.append(record.leaseOwner)
        binds.append(ms(record.leaseExpiresAt))
        binds.append(ms(record.confirmDeadline))
        binds.append(ms(record.dueAt))
        binds.append(ms(record.expiresAt))
        binds.append(ms(record.updatedAt))
        binds.append(record.deadCode?.rawValue)
        binds.append(record.lastStatus.map { Int64($0) })
    }

    /// Rewrites each record in place if it is still at its expected revision (compare-and-set), in one statement
    /// per 1,000 records; returns the ids it rewrote. For records of distinct escrows only (a claim's): with two
    /// records of one escrow, which of them PostgreSQL writes is not defined.
    static func update(
        _ records: [(record: EscrowRecord, expectedRevision: Int64)],
        _ connection: PostgresConnection,
        logger: Logger
    ) async throws -> Set<EscrowID> {
        let changeable = changeableColumns
        let columns = ["id", "expected"] + changeable.map(\.name)
        // The first row's types name the VALUES list's column types (a NULL there is typed too).
        let types = ["bytea", "bigint"] + changeable.map(\.type)
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

    /// Deletes a row if it is still at `expectedRevision`; returns whether it was.
    static func delete(
        id: EscrowID,
        expectedRevision: Int64?,
        _ connection: PostgresConnection,
        logger: Logger
    ) async throws -> Bool {
        let rows: [PostgresRow]
        if let expectedRevision {
            rows = try await connection.query(
                "DELETE FROM escrow WHERE id = \(Data(id.bytes)) AND revision = \(expectedRevision) RETURNING 1",
                logger: logger
            ).collect()
        } else {
            rows = try await connection.query(
                "DELETE FROM escrow WHERE id = \(Data(id.bytes)) RETURNING 1",
                logger: logger
            ).collect()
        }
        return rows.count == 1
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

    /// Applies what the lifecycle decided for a malformed row inside the caller's transaction, with its events;
    /// returns whether the row was there.
    static func apply(
        _ action: MalformedRowAction,
        rowID: Int64,
        _ connection: PostgresConnection,
        _ audit: inout PendingAudit,
        logger: Logger
    ) async throws -> Bool {
        let rows: [PostgresRow]
        switch action.change {
        case .quarantine(let revision, let updatedAt, _):
            rows = try await connection.query(
                """
                UPDATE escrow SET state = \(EscrowState.dead.rawValue), dead_code = \(DeadCode.ciphertextInvalid.rawValue),
                    lease_owner = NULL, lease_expires_at = NULL, confirm_deadline = NULL, due_at = NULL,
                    revision = \(revision), updated_at = \(ms(updatedAt))
                WHERE row_id = \(rowID) RETURNING 1
                """,
                logger: logger
            ).collect()
        case .delete:
            rows = try await connection.query("DELETE FROM escrow WHERE row_id = \(rowID) RETURNING 1", logger: logger)
                .collect()
        }
        guard rows.count == 1 else { return false }
        audit.add(action.auditDrafts)
        return true
    }

    /// Reads (and locks) what is known of the malformed row `error` names and applies the lifecycle's action for
    /// `event` to it, inside the caller's transaction; returns whether the row was there.
    static func handle(
        _ event: MalformedRowEvent,
        on error: MalformedRow,
        lifecycle: EscrowLifecycle,
        at now: Date,
        actor: AuditActor,
        _ connection: PostgresConnection,
        _ audit: inout PendingAudit,
        logger: Logger
    ) async throws -> Bool {
        guard let row = try await malformed(error.rowID, column: error.column, connection, logger: logger) else {
            return false
        }
        let action = lifecycle.handle(event, on: row, at: now, actor: actor)
        return try await apply(action, rowID: row.rowID, connection, &audit, logger: logger)
    }

    /// Refuses a transaction that wrote rows sealed to a retired master key version: nobody holds its secret key any
    /// more. Runs after the transaction's own writes: a concurrent `retireKeyVersion` locks the escrow table in SHARE
    /// mode, so either it waited for this transaction (and counts its rows), or this check sees its version.
    static func requireUsable(_ versions: Set<UInt32>, _ connection: PostgresConnection, logger: Logger) async throws {
        guard !versions.isEmpty else { return }
        let rows = try await connection.query(
            "SELECT version FROM retired_key_version WHERE version = ANY(\(versions.sorted().map { Int64($0) })) LIMIT 1",
            logger: logger
        ).collect().map { try $0.decode(Int64.self) }
        if let version = rows.first {
            throw EscrowStoreError(
                .keyVersionRetired,
                "master key version \(version) is retired: nothing may be sealed to it (the writing node's keyring "
                    + "is out of date; reload it)"
            )
        }
    }

    static let auditColumns = "seq, at, type, escrow_id, index_prefix, detail, http_status, actor, age_ms, hash"

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
            ageMilliseconds: try cells[8].decode(Int64?.self)
        )
        return AuditEvent(
            sequence: try cells[0].decode(Int64.self),
            draft: draft,
            hash: [UInt8](try cells[9].decode(Data.self))
        )
    }
}
