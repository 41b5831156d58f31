public import EscrowCore
public import EscrowCrypto
public import Foundation
import Logging
import PostgresNIO

extension PostgresEscrowStore {
    public func record(id: EscrowID) async throws -> EscrowRecord? {
        try await fetch(.id, id.bytes)
    }

    public func record(blindIndex: BlindIndex) async throws -> EscrowRecord? {
        try await fetch(.blindIndex, blindIndex.bytes)
    }

    public func malformedRow(blindIndex: BlindIndex) async throws -> MalformedEscrowRow? {
        try await malformedRow(.blindIndex, blindIndex.bytes)
    }

    public func malformedRow(id: EscrowID) async throws -> MalformedEscrowRow? {
        try await malformedRow(.id, id.bytes)
    }

    private func malformedRow(_ column: KeyColumn, _ value: [UInt8]) async throws -> MalformedEscrowRow? {
        let logger = database.logger
        return try await database.withConnection("read failed") { connection in
            guard let row = try await Self.fetchRow(connection, column, value, logger: logger) else {
                return nil
            }
            do throws(MalformedRow) {
                _ = try Self.record(from: row)
                return nil
            } catch {
                return try await Self.malformed(
                    error.rowID,
                    column: error.column,
                    connection,
                    forUpdate: false,
                    logger: logger
                )
            }
        }
    }

    private func fetch(_ column: KeyColumn, _ value: [UInt8]) async throws -> EscrowRecord? {
        let logger = database.logger
        let row = try await database.withConnection("read failed") { connection in
            try await Self.fetchRow(connection, column, value, logger: logger)
        }
        do {
            return try row.map { row throws(MalformedRow) in try Self.record(from: row) }
        } catch {
            throw database.storeError(error, "read failed")
        }
    }

    public func records(_ query: RecordQuery, after cursor: EscrowID?, limit: Int) async throws -> [EscrowRecord] {
        let after = Data(cursor?.bytes ?? [])
        let columns = Self.escrowColumns
        let sql: PostgresQuery =
            switch query {
            case .all:
                try "SELECT \(unescaped: columns) FROM escrow WHERE id > \(after) ORDER BY id LIMIT \(limit)"
            case .expired(let now):
                try """
                SELECT \(unescaped: columns) FROM escrow WHERE expires_at <= \(Self.ms(now)) AND id > \(after)
                ORDER BY id LIMIT \(limit)
                """
            case .state(let state):
                try """
                SELECT \(unescaped: columns) FROM escrow WHERE state = \(state.rawValue) AND id > \(after)
                ORDER BY id LIMIT \(limit)
                """
            case .keyVersionOtherThan(let version):
                try """
                SELECT \(unescaped: columns) FROM escrow WHERE key_version <> \(Int64(version)) AND id > \(after)
                ORDER BY id LIMIT \(limit)
                """
            case .dueSealedToNoneOf(let versions, let now):
                try """
                SELECT \(unescaped: columns) FROM escrow
                WHERE due_at <= \(Self.ms(now)) AND NOT (key_version = ANY(\(versions.sorted().map { Int64($0) })))
                    AND id > \(after)
                ORDER BY id LIMIT \(limit)
                """
            }
        // A malformed row is left out of listings (the worker's claim moves it to dead).
        return try await database.rows("read failed", sql).compactMap { try? Self.record(from: $0) }
    }

    public func keyVersionsInUse() async throws -> [UInt32: Int] {
        try countsByVersion(
            try await database.rows("read failed", "SELECT key_version, COUNT(*) FROM escrow GROUP BY key_version")
        )
    }

    public func queuedItemsSealed() async throws -> [UInt32: Int] {
        try countsByVersion(
            try await database.rows("read failed", PostgresQuery(unsafeSQL: QueuedSealedItems.countsByVersion))
        )
    }

    /// Rows of (key version, count) by version. A version outside 32 bits is a malformed row, not a version in use.
    func countsByVersion(_ rows: [PostgresRow]) throws -> [UInt32: Int] {
        var result: [UInt32: Int] = [:]
        for row in rows {
            let (version, count) = try decode(row, (Int64, Int64).self)
            guard let version = UInt32(exactly: version) else { continue }
            result[version] = Int(count)
        }
        return result
    }

    public func retiredKeyVersions() async throws -> Set<UInt32> {
        let rows = try await database.rows("read failed", "SELECT version FROM retired_key_version")
        return Set(try rows.compactMap { UInt32(exactly: try decode($0, Int64.self)) })
    }

    public func auditEvents(escrowID: String, limit: Int) async throws -> [AuditEvent] {
        let rows = try await database.rows(
            "read failed",
            """
            SELECT \(unescaped: Self.auditColumns) FROM audit_event WHERE escrow_id = \(escrowID)
            ORDER BY seq LIMIT \(limit)
            """
        )
        return try rows.map { try events($0) }
    }

    public func auditEvents(after sequence: Int64, limit: Int) async throws -> [AuditEvent] {
        let rows = try await database.rows(
            "read failed",
            "SELECT \(unescaped: Self.auditColumns) FROM audit_event WHERE seq > \(sequence) ORDER BY seq LIMIT \(limit)"
        )
        return try rows.map { try events($0) }
    }

    /// Reads only the columns the report counts, of the counted types only.
    public func auditTallies(after sequence: Int64, limit: Int) async throws -> [AuditTally] {
        let rows = try await database.rows(
            "read failed",
            """
            SELECT seq, at, type, detail, age_ms FROM audit_event
            WHERE seq > \(sequence) AND type IN (\(unescaped: AuditTally.Kind.countedTypesSQL))
            ORDER BY seq LIMIT \(limit)
            """
        )
        return try rows.compactMap { row in
            let (sequence, at, type, detail, age) = try decode(row, (Int64, Int64, String, String?, Int64?).self)
            return AuditTally.Kind(type: type, detail: detail, ageMilliseconds: age).map {
                AuditTally(sequence: sequence, at: at, kind: $0)
            }
        }
    }

    public func auditHead() async throws -> AuditHead? {
        let rows = try await database.rows("read failed", "SELECT seq, hash FROM audit_head WHERE singleton = 1")
        guard let row = rows.first else { return nil }
        let (sequence, hash) = try decode(row, (Int64, Data).self)
        // A head at the genesis (created, no event appended yet) is no head, as on SQLite.
        return sequence == 0 ? nil : AuditHead(sequence: sequence, hash: [UInt8](hash))
    }

    public func summary(at now: Date) async throws -> StoreSummary {
        let logger = database.logger
        let pending = EscrowState.pending.rawValue
        let dead = EscrowState.dead.rawValue
        do {
            // One snapshot for every count.
            return try await database.withConnection("read failed") { connection in
                try await connection.withTransaction(logger: logger) { connection in
                    try await connection.query(
                        "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY",
                        logger: logger
                    )
                    var live: [EscrowState: Int] = [:]
                    for state in EscrowState.live { live[state] = 0 }
                    var oldest: Int64?
                    var oldestPending: Int64?
                    var overdue: Int64 = 0
                    // One scan of the table for the counts, the oldest and the overdue (a scan is most of a summary's
                    // cost at a million escrows).
                    for try await (state, count, oldestOfState, overdueOfState) in try await connection.query(
                        """
                        SELECT state, COUNT(*), MIN(created_at), COUNT(*) FILTER (WHERE expires_at <= \(Self.ms(now)))
                        FROM escrow GROUP BY state
                        """,
                        logger: logger
                    ).decode((String, Int64, Int64, Int64).self) {
                        if let known = EscrowState(rawValue: state) { live[known] = Int(count) }
                        oldest = min(oldest ?? oldestOfState, oldestOfState)
                        if state == pending { oldestPending = oldestOfState }
                        overdue += overdueOfState
                    }
                    var deadEscrows: [DeadEscrow] = []
                    for try await (id, code) in try await connection.query(
                        "SELECT id, dead_code FROM escrow WHERE state = \(dead) ORDER BY created_at",
                        logger: logger
                    ).decode((Data?, String?).self) {
                        // Every dead row, a quarantined malformed one too: its id column's bytes, whatever they are.
                        deadEscrows.append(
                            DeadEscrow(idHex: id.map { Hex.encode($0) } ?? "", code: code.map(DeadCode.init(rawValue:)))
                        )
                    }
                    return StoreSummary(
                        live: live,
                        oldestLiveCreatedAt: Self.date(oldest),
                        oldestPendingCreatedAt: Self.date(oldestPending),
                        overdue: Int(overdue),
                        dead: deadEscrows
                    )
                }
            }
        } catch {
            throw database.storeError(error, "read failed")
        }
    }

    public func auditCheckpoints() async throws -> [AuditCheckpoint] {
        try await database.withConnection("read failed") { [logger = database.logger] connection in
            try await Self.checkpoints(connection, newestOnly: false, logger: logger)
        }
    }

    static func checkpoints(
        _ connection: PostgresConnection,
        newestOnly: Bool,
        logger: Logger
    ) async throws -> [AuditCheckpoint] {
        let rows = try await connection.query(
            """
            SELECT seq, hash, first_seq, event_count, earliest_at, latest_at, archived_at
            FROM audit_checkpoint ORDER BY seq \(unescaped: newestOnly ? "DESC LIMIT 1" : "")
            """,
            logger: logger
        ).collect()
        return try rows.map { row in
            let (sequence, hash, first, count, earliest, latest, archived) = try row.decode(
                (Int64, Data, Int64, Int64, Int64, Int64, Int64).self
            )
            return AuditCheckpoint(
                sequence: sequence,
                hash: [UInt8](hash),
                firstSequence: first,
                eventCount: count,
                earliestAt: earliest,
                latestAt: latest,
                archivedAt: archived
            )
        }
    }

    private func events(_ row: PostgresRow) throws -> AuditEvent {
        do { return try Self.event(from: row) } catch {
            throw EscrowStoreError(.failed, "an audit event does not decode")
        }
    }

    /// Decodes a row of a store-written table; a value of the wrong type is a `store_failed` without its content.
    func decode<each Column: PostgresDecodable>(
        _ row: PostgresRow,
        _ type: (repeat each Column).Type
    ) throws -> (repeat each Column) {
        do { return try row.decode(type) } catch {
            throw EscrowStoreError(.failed, "a stored value does not decode")
        }
    }

    func decode<Column: PostgresDecodable>(_ row: PostgresRow, _ type: Column.Type) throws -> Column {
        do { return try row.decode(Column.self) } catch {
            throw EscrowStoreError(.failed, "a stored value does not decode")
        }
    }
}
