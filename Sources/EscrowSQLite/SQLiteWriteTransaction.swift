import EscrowCore
import EscrowCrypto
import Foundation
import GRDB

/// The SQLite statements the store engine runs (``EscrowWriteTransaction``), on the writer connection inside one
/// `BEGIN IMMEDIATE … COMMIT` under the cross-process write lock. Used only on the writer's thread (see
/// ``InlineTask``); every statement is synchronous and prepared once per connection.
struct SQLiteWriteTransaction: EscrowWriteTransaction {
    let db: Database

    /// One `INSERT … ON CONFLICT (blind_index) DO NOTHING` a record: SQLite's statements cost no round trip.
    func insertIfNoLiveEscrow(_ records: [EscrowRecord]) throws -> Set<EscrowID> {
        var inserted: Set<EscrowID> = []
        let statement = try db.cachedStatement(sql: Self.insertSQL + " ON CONFLICT (blind_index) DO NOTHING")
        for record in records {
            try statement.run(EscrowColumn.allCases.lazy.map(record.storedValue), in: db)
            if db.changesCount == 1 { inserted.insert(record.id) }
        }
        return inserted
    }

    func insert(_ record: EscrowRecord) throws {
        try db.cachedStatement(sql: Self.insertSQL).run(EscrowColumn.allCases.lazy.map(record.storedValue), in: db)
    }

    func liveRow(blindIndex: BlindIndex) throws -> StoredEscrow? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT \(SQLiteEscrowStore.escrowColumns) FROM escrow WHERE blind_index = ?"),
            arguments: [Data(blindIndex.bytes)]
        ).map(SQLiteEscrowStore.stored(from:))
    }

    func dueRows(at now: Date, keyVersions: Set<UInt32>?, limit: Int) throws -> [StoredEscrow] {
        // Integers only, formatted by Swift: nothing of the caller's can reach the SQL text. A version outside 32
        // bits is no version at all: such rows are selected whatever the filter, to be quarantined.
        let versionFilter =
            keyVersions.map {
                " AND (key_version IN (\($0.sorted().map(String.init).joined(separator: ",")))"
                    + " OR key_version NOT BETWEEN 0 AND 4294967295)"
            } ?? ""
        // Cached: the text changes only with the keyring's versions, and preparing it again for every claim (SQLite's
        // parse and plan, GRDB's authorizer) cost more than reading the rows it selects.
        return try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT \(SQLiteEscrowStore.escrowColumns) FROM escrow WHERE due_at <= ?\(versionFilter)
                    ORDER BY due_at LIMIT ?
                    """
            ),
            arguments: [Timestamp.unixMilliseconds(now), limit]
        ).map(SQLiteEscrowStore.stored(from:))
    }

    func expiredRows(at now: Date) throws -> [StoredEscrow] {
        try Row.fetchAll(
            db,
            sql: "SELECT \(SQLiteEscrowStore.escrowColumns) FROM escrow WHERE expires_at <= ?",
            arguments: [Timestamp.unixMilliseconds(now)]
        ).map(SQLiteEscrowStore.stored(from:))
    }

    func update(_ changes: [(record: EscrowRecord, expectedRevision: Int64)]) throws -> Set<EscrowID> {
        let statement = try db.cachedStatement(sql: Self.updateSQL)
        var updated: Set<EscrowID> = []
        for change in changes {
            try statement.run(
                EscrowColumn.changeable.map(change.record.storedValue)
                    + [.bytes(change.record.id.bytes), .integer(change.expectedRevision)],
                in: db
            )
            if db.changesCount == 1 { updated.insert(change.record.id) }
        }
        return updated
    }

    func delete(_ rows: [(id: EscrowID, revision: Int64)]) throws -> [EscrowID: Int64] {
        let statement = try db.cachedStatement(sql: "DELETE FROM escrow WHERE id = ? AND revision = ?")
        var deleted: [EscrowID: Int64] = [:]
        for row in rows {
            try statement.run([.bytes(row.id.bytes), .integer(row.revision)], in: db)
            if db.changesCount == 1 { deleted[row.id] = row.revision }
        }
        return deleted
    }

    func malformedRow(_ row: MalformedRow) throws -> MalformedEscrowRow? {
        try SQLiteEscrowStore.malformed(row.rowID, column: row.column, db)
    }

    func apply(_ action: MalformedRowAction, toRowID rowID: Int64) throws -> Bool {
        switch action.change {
        case .quarantine(let revision, let updatedAt, _):
            try db.cachedStatement(
                sql: """
                    UPDATE escrow SET state = ?, dead_code = ?, lease_owner = NULL, lease_expires_at = NULL,
                        confirm_deadline = NULL, due_at = NULL, revision = ?, updated_at = ?
                    WHERE rowid = ?
                    """
            ).execute(arguments: [
                EscrowState.dead.rawValue, DeadCode.ciphertextInvalid.rawValue, revision,
                Timestamp.unixMilliseconds(updatedAt), rowID,
            ])
        case .delete:
            try db.cachedStatement(sql: "DELETE FROM escrow WHERE rowid = ?").execute(arguments: [rowID])
        }
        return db.changesCount == 1
    }

    func requireUsable(_ versions: Set<UInt32>) throws {
        let statement = try db.cachedStatement(sql: "SELECT 1 FROM retired_key_version WHERE version = ?")
        for version in versions.sorted() {
            guard try Row.fetchOne(statement, arguments: [Int64(version)]) != nil else { continue }
            throw EscrowStoreError(
                .keyVersionRetired,
                "master key version \(version) is retired: nothing may be sealed to it (the writing node's keyring "
                    + "is out of date; reload it)"
            )
        }
    }

    /// The writer holds the database's only write lock for the whole transaction: reading the head is locking it.
    func lockAuditHead() throws -> AuditHead? {
        try Row.fetchOne(db.cachedStatement(sql: "SELECT seq, hash FROM audit_head WHERE singleton = 1"))
            .map { AuditHead(sequence: $0[0], hash: [UInt8]($0[1] as Data)) }
    }

    func insertAudit(_ events: [AuditEvent], head: AuditHead) throws {
        let insert = try db.cachedStatement(sql: Self.insertAuditSQL)
        for event in events {
            try insert.run(event.storedValues, in: db)
        }
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO audit_head (singleton, seq, hash) VALUES (1, ?, ?)")
            .execute(arguments: [head.sequence, Data(head.hash)])
    }

    func auditHead() throws -> AuditHead? {
        try lockAuditHead()
    }

    func auditCheckpoint() throws -> AuditCheckpoint? {
        try SQLiteEscrowStore.checkpoints(db, newestOnly: true).last
    }

    /// Walks the events from `sequence` on (`+at`: not the time index), so the cost is the events before the time,
    /// the ones a cut is about to read anyway, not the ones after it.
    func firstAuditSequence(after sequence: Int64, atOrAfter milliseconds: Int64) throws -> Int64? {
        try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT seq FROM audit_event WHERE seq > ? AND +at >= ? ORDER BY seq LIMIT 1"),
            arguments: [sequence, milliseconds]
        )
    }

    /// One index lookup a live escrow (`audit_event_escrow`): the cost follows the live escrows, not the events.
    func firstLiveEscrowAuditSequence(after sequence: Int64) throws -> Int64? {
        try Int64.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT MIN((SELECT MIN(seq) FROM audit_event
                                WHERE escrow_id = lower(hex(escrow.id)) AND seq > ?1)) FROM escrow
                    """
            ),
            arguments: [sequence]
        )
    }

    func auditHash(at sequence: Int64) throws -> [UInt8]? {
        try Data.fetchOne(db.cachedStatement(sql: "SELECT hash FROM audit_event WHERE seq = ?"), arguments: [sequence])
            .map { [UInt8]($0) }
    }

    func deleteAudit(_ range: ClosedRange<Int64>) throws -> Int {
        try db.execute(
            sql: "DELETE FROM audit_event WHERE seq BETWEEN ? AND ?",
            arguments: [range.lowerBound, range.upperBound]
        )
        return db.changesCount
    }

    func insertCheckpoint(_ checkpoint: AuditCheckpoint) throws {
        try db.execute(
            sql: """
                INSERT INTO audit_checkpoint (seq, hash, first_seq, event_count, earliest_at, latest_at, archived_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                checkpoint.sequence, Data(checkpoint.hash), checkpoint.firstSequence, checkpoint.eventCount,
                checkpoint.earliestAt, checkpoint.latestAt, checkpoint.archivedAt,
            ]
        )
    }

    // MARK: - Statements

    private static let insertSQL =
        "INSERT INTO escrow (\(EscrowColumn.allCases.map(\.rawValue).joined(separator: ", "))) VALUES ("
        + Array(repeating: "?", count: EscrowColumn.allCases.count).joined(separator: ", ") + ")"

    private static let insertAuditSQL =
        "INSERT INTO audit_event (\(AuditEvent.storedColumns.joined(separator: ", "))) VALUES ("
        + Array(repeating: "?", count: AuditEvent.storedColumns.count).joined(separator: ", ") + ")"

    private static let updateSQL =
        "UPDATE escrow SET \(EscrowColumn.changeable.map { "\($0.rawValue) = ?" }.joined(separator: ", "))"
        + " WHERE id = ? AND revision = ?"
}
