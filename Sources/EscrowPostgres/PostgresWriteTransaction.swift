import EscrowCore
import EscrowCrypto
import Foundation
import Logging
import PostgresNIO

/// The PostgreSQL statements the store engine runs (``EscrowWriteTransaction``), on one pooled connection inside one
/// transaction. Rows the engine will change are locked as they are read (`FOR UPDATE`; a claim skips rows another
/// node holds), and batches are one statement each (`INSERT … VALUES (…), (…)`, `UPDATE … FROM (VALUES …)`,
/// `DELETE … USING (VALUES …)`): one round trip instead of one a row.
struct PostgresWriteTransaction: EscrowWriteTransaction {
    let connection: PostgresConnection
    let logger: Logger

    func insertIfNoLiveEscrow(_ records: [EscrowRecord]) async throws -> Set<EscrowID> {
        try await PostgresEscrowStore.insertNew(records, connection, logger: logger)
    }

    func insert(_ record: EscrowRecord) async throws {
        try await PostgresEscrowStore.insert(record, connection, logger: logger)
    }

    func liveRow(blindIndex: BlindIndex) async throws -> StoredEscrow? {
        try await PostgresEscrowStore.fetchRow(
            connection,
            .blindIndex,
            blindIndex.bytes,
            forUpdate: true,
            logger: logger
        )
        .map(PostgresEscrowStore.stored(from:))
    }

    func dueRows(at now: Date, keyVersions: Set<UInt32>?, limit: Int) async throws -> [StoredEscrow] {
        let now = PostgresEscrowStore.ms(now)
        let columns = PostgresEscrowStore.escrowColumns
        let rows: [PostgresRow]
        if let versions = keyVersions {
            // A version outside 32 bits is no version at all: such rows are selected whatever the filter, to be
            // quarantined.
            rows = try await connection.query(
                """
                SELECT \(unescaped: columns) FROM escrow
                WHERE due_at <= \(now) AND (key_version = ANY(\(versions.sorted().map { Int64($0) }))
                    OR key_version NOT BETWEEN 0 AND 4294967295)
                ORDER BY due_at LIMIT \(limit) FOR UPDATE SKIP LOCKED
                """,
                logger: logger
            ).collect()
        } else {
            rows = try await connection.query(
                """
                SELECT \(unescaped: columns) FROM escrow WHERE due_at <= \(now)
                ORDER BY due_at LIMIT \(limit) FOR UPDATE SKIP LOCKED
                """,
                logger: logger
            ).collect()
        }
        return rows.map(PostgresEscrowStore.stored(from:))
    }

    func expiredRows(at now: Date) async throws -> [StoredEscrow] {
        try await connection.query(
            """
            SELECT \(unescaped: PostgresEscrowStore.escrowColumns) FROM escrow
            WHERE expires_at <= \(PostgresEscrowStore.ms(now)) FOR UPDATE
            """,
            logger: logger
        ).collect().map(PostgresEscrowStore.stored(from:))
    }

    func update(_ changes: [(record: EscrowRecord, expectedRevision: Int64)]) async throws -> Set<EscrowID> {
        try await PostgresEscrowStore.update(changes, connection, logger: logger)
    }

    func delete(_ rows: [(id: EscrowID, revision: Int64)]) async throws -> [EscrowID: Int64] {
        try await PostgresEscrowStore.delete(rows, connection, logger: logger)
    }

    func malformedRow(_ row: MalformedRow) async throws -> MalformedEscrowRow? {
        try await PostgresEscrowStore.malformed(row.rowID, column: row.column, connection, logger: logger)
    }

    func apply(_ action: MalformedRowAction, toRowID rowID: Int64) async throws -> Bool {
        let rows: [PostgresRow]
        switch action.change {
        case .quarantine(let revision, let updatedAt, _):
            rows = try await connection.query(
                """
                UPDATE escrow SET state = \(EscrowState.dead.rawValue), dead_code = \(DeadCode.ciphertextInvalid.rawValue),
                    lease_owner = NULL, lease_expires_at = NULL, confirm_deadline = NULL, due_at = NULL,
                    revision = \(revision), updated_at = \(PostgresEscrowStore.ms(updatedAt))
                WHERE row_id = \(rowID) RETURNING 1
                """,
                logger: logger
            ).collect()
        case .delete:
            rows = try await connection.query("DELETE FROM escrow WHERE row_id = \(rowID) RETURNING 1", logger: logger)
                .collect()
        }
        return rows.count == 1
    }

    /// Runs after the transaction's own writes: a concurrent `retireKeyVersion` locks the escrow table in SHARE mode,
    /// so either it waited for this transaction (and counts its rows), or this check sees its version.
    func requireUsable(_ versions: Set<UInt32>) async throws {
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

    /// One chain for every node: the head row is locked (`SELECT … FOR UPDATE`), so appending transactions serialize
    /// on it and each continues the chain where the last committed one left it, with no gap or fork. The engine takes
    /// it last, after the transaction's row changes: a transaction that holds it never waits for an escrow row. The
    /// row is created at the genesis when this is the first event ever (two transactions creating it at once both
    /// succeed, one inserting and the other waiting, then locking the row the first made).
    func lockAuditHead() async throws -> AuditHead? {
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

    /// The most events in one INSERT (ten parameters each; PostgreSQL allows 65,535 per statement).
    static let eventsPerInsert = 1_000

    func insertAudit(_ events: [AuditEvent], head: AuditHead) async throws {
        let columns = AuditEvent.storedColumns
        var start = 0
        while start < events.count {
            let chunk = events[start..<min(start + Self.eventsPerInsert, events.count)]
            start += chunk.count
            var sql = "INSERT INTO audit_event (\(columns.joined(separator: ", "))) VALUES "
            var binds = PostgresBindings(capacity: chunk.count * columns.count)
            for (offset, event) in chunk.enumerated() {
                let first = offset * columns.count
                sql += offset == 0 ? "(" : ", ("
                sql += (1...columns.count).map { "$\(first + $0)" }.joined(separator: ", ") + ")"
                for value in event.storedValues { try PostgresEscrowStore.bind(value, to: &binds) }
            }
            try await connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        }
        try await connection.query(
            "UPDATE audit_head SET seq = \(head.sequence), hash = \(Data(head.hash)) WHERE singleton = 1",
            logger: logger
        )
    }

    func auditHead() async throws -> AuditHead? {
        let rows = try await connection.query("SELECT seq, hash FROM audit_head WHERE singleton = 1", logger: logger)
            .collect().map { try $0.decode((Int64, Data).self) }
        guard let (sequence, hash) = rows.first, sequence > 0 else { return nil }
        return AuditHead(sequence: sequence, hash: [UInt8](hash))
    }

    func auditCheckpoint() async throws -> AuditCheckpoint? {
        try await PostgresEscrowStore.checkpoints(connection, newestOnly: true, logger: logger).last
    }

    func firstAuditSequence(after sequence: Int64, atOrAfter milliseconds: Int64) async throws -> Int64? {
        try await connection.query(
            "SELECT seq FROM audit_event WHERE seq > \(sequence) AND at >= \(milliseconds) ORDER BY seq LIMIT 1",
            logger: logger
        ).collect().map { try $0.decode(Int64?.self) }.first ?? nil
    }

    /// One index lookup a live escrow (`audit_event_escrow`): the cost follows the live escrows, not the events.
    func firstLiveEscrowAuditSequence(after sequence: Int64) async throws -> Int64? {
        try await connection.query(
            """
            SELECT MIN((SELECT MIN(seq) FROM audit_event
                        WHERE escrow_id = encode(escrow.id, 'hex') AND seq > \(sequence))) FROM escrow
            """,
            logger: logger
        ).collect().map { try $0.decode(Int64?.self) }.first ?? nil
    }

    func auditHash(at sequence: Int64) async throws -> [UInt8]? {
        try await connection.query("SELECT hash FROM audit_event WHERE seq = \(sequence)", logger: logger)
            .collect().map { [UInt8](try $0.decode(Data.self)) }.first
    }

    func deleteAudit(_ range: ClosedRange<Int64>) async throws -> Int {
        let rows = try await connection.query(
            """
            WITH deleted AS (
                DELETE FROM audit_event WHERE seq BETWEEN \(range.lowerBound) AND \(range.upperBound) RETURNING 1
            )
            SELECT COUNT(*) FROM deleted
            """,
            logger: logger
        ).collect().map { try $0.decode(Int64.self) }
        return Int(rows.first ?? 0)
    }

    func insertCheckpoint(_ checkpoint: AuditCheckpoint) async throws {
        try await connection.query(
            """
            INSERT INTO audit_checkpoint (seq, hash, first_seq, event_count, earliest_at, latest_at, archived_at)
            VALUES (\(checkpoint.sequence), \(Data(checkpoint.hash)), \(checkpoint.firstSequence),
                \(checkpoint.eventCount), \(checkpoint.earliestAt), \(checkpoint.latestAt), \(checkpoint.archivedAt))
            """,
            logger: logger
        )
    }
}
