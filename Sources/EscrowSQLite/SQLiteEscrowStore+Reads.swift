public import EscrowCore
public import EscrowCrypto
public import Foundation
import GRDB

extension SQLiteEscrowStore {
    public func record(id: EscrowID) async throws -> EscrowRecord? {
        try await read { db in try Self.fetchRecord(db, where: "id = ?", [Data(id.bytes)]) }
    }

    public func record(blindIndex: BlindIndex) async throws -> EscrowRecord? {
        try await read { db in try Self.fetchRecord(db, where: "blind_index = ?", [Data(blindIndex.bytes)]) }
    }

    public func records(_ query: RecordQuery, after cursor: EscrowID?, limit: Int) async throws -> [EscrowRecord] {
        let (condition, arguments): (String, StatementArguments) =
            switch query {
            case .all: ("1", [])
            case .expired(let now): ("expires_at <= ?", [Timestamp.unixMilliseconds(now)])
            case .state(let state): ("state = ?", [state.rawValue])
            case .keyVersionOtherThan(let version): ("key_version <> ?", [Int64(version)])
            case .dueSealedToNoneOf(let versions, let now):
                // Integers only, formatted by Swift: nothing of the caller's can reach the SQL text.
                (
                    "due_at <= ? AND key_version NOT IN (\(versions.sorted().map(String.init).joined(separator: ",")))",
                    [Timestamp.unixMilliseconds(now)]
                )
            }
        let after = Data(cursor?.bytes ?? [])
        return try await read { db in
            // A malformed row is left out of listings (the worker's claim moves it to dead).
            try Row.fetchAll(
                db,
                sql: "SELECT \(Self.escrowColumns) FROM escrow WHERE \(condition) AND id > ? ORDER BY id LIMIT ?",
                arguments: arguments + [after, limit]
            ).compactMap { try? Self.record(from: $0) }
        }
    }

    public func keyVersionsInUse() async throws -> [UInt32: Int] {
        try await read { db in
            try Self.countsByVersion(db, "SELECT key_version, COUNT(*) FROM escrow GROUP BY key_version")
        }
    }

    public func queuedItemsSealed() async throws -> [UInt32: Int] {
        try await read { try Self.queuedItemsSealed($0) }
    }

    static func queuedItemsSealed(_ db: Database) throws -> [UInt32: Int] {
        try countsByVersion(db, QueuedSealedItems.countsByVersion)
    }

    /// The rows of `sql`, (key version, count), by version. A version outside 32 bits is a malformed row, not a
    /// version in use.
    private static func countsByVersion(_ db: Database, _ sql: String) throws -> [UInt32: Int] {
        var result: [UInt32: Int] = [:]
        for row in try Row.fetchAll(try db.cachedStatement(sql: sql)) {
            guard let version = (row[0] as Int64?).flatMap({ UInt32(exactly: $0) }) else { continue }
            result[version] = row[1]
        }
        return result
    }

    public func malformedRow(blindIndex: BlindIndex) async throws -> MalformedEscrowRow? {
        try await malformedRow(where: "blind_index = ?", Data(blindIndex.bytes))
    }

    public func malformedRow(id: EscrowID) async throws -> MalformedEscrowRow? {
        try await malformedRow(where: "id = ?", Data(id.bytes))
    }

    private func malformedRow(where condition: String, _ key: Data) async throws -> MalformedEscrowRow? {
        try await read { db in
            guard
                let row = try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT \(Self.escrowColumns) FROM escrow WHERE \(condition)"),
                    arguments: [key]
                ),
                case .malformed(let malformed) = Self.stored(from: row)
            else { return nil }
            return try Self.malformed(malformed.rowID, column: malformed.column, db)
        }
    }

    public func retiredKeyVersions() async throws -> Set<UInt32> {
        try await read { db in
            Set(
                try Int64.fetchAll(db, sql: "SELECT version FROM retired_key_version").compactMap {
                    UInt32(exactly: $0)
                }
            )
        }
    }

    public func auditEvents(escrowID: String, limit: Int) async throws -> [AuditEvent] {
        try await read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: "SELECT \(Self.auditColumns) FROM audit_event WHERE escrow_id = ? ORDER BY seq LIMIT ?"
                ),
                arguments: [escrowID, limit]
            ).map(Self.event(from:))
        }
    }

    public func auditEvents(after sequence: Int64, limit: Int) async throws -> [AuditEvent] {
        try await read { db in
            // A cursor maps each row as SQLite steps, without copying the page into Row values first.
            let cursor = try Row.fetchCursor(
                db.cachedStatement(
                    sql: "SELECT \(Self.auditColumns) FROM audit_event WHERE seq > ? ORDER BY seq LIMIT ?"
                ),
                arguments: [sequence, limit]
            )
            var events: [AuditEvent] = []
            events.reserveCapacity(min(limit, 65_536))
            while let row = try cursor.next() { events.append(Self.event(from: row)) }
            return events
        }
    }

    /// Reads only the columns the report counts, of the counted types only: no id, index, actor or hash
    /// strings are made (a report over a million events made four heap strings per event for nothing).
    public func auditTallies(after sequence: Int64, limit: Int) async throws -> [AuditTally] {
        try await read { db in
            let cursor = try Row.fetchCursor(
                db.cachedStatement(
                    sql: """
                        SELECT seq, at, type, detail, age_ms FROM audit_event
                        WHERE seq > ? AND type IN (\(AuditTally.Kind.countedTypesSQL)) ORDER BY seq LIMIT ?
                        """
                ),
                arguments: [sequence, limit]
            )
            var tallies: [AuditTally] = []
            tallies.reserveCapacity(min(limit, 65_536))
            while let row = try cursor.next() {
                guard let kind = AuditTally.Kind(type: row[2] ?? "", detail: row[3], ageMilliseconds: row[4]) else {
                    continue
                }
                tallies.append(AuditTally(sequence: row[0], at: row[1], kind: kind))
            }
            return tallies
        }
    }

    public func auditHead() async throws -> AuditHead? {
        try await read { db in
            try Row.fetchOne(try db.cachedStatement(sql: "SELECT seq, hash FROM audit_head WHERE singleton = 1"))
                .map { AuditHead(sequence: $0["seq"], hash: [UInt8]($0["hash"] as Data)) }
        }
    }

    public func auditCheckpoints() async throws -> [AuditCheckpoint] {
        try await read { db in try Self.checkpoints(db, newestOnly: false) }
    }

    static func checkpoints(_ db: Database, newestOnly: Bool) throws -> [AuditCheckpoint] {
        try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT seq, hash, first_seq, event_count, earliest_at, latest_at, archived_at
                    FROM audit_checkpoint ORDER BY seq \(newestOnly ? "DESC LIMIT 1" : "")
                    """
            )
        ).map { row in
            AuditCheckpoint(
                sequence: row[0],
                hash: [UInt8]((row[1] as Data?) ?? Data()),
                firstSequence: row[2],
                eventCount: row[3],
                earliestAt: row[4],
                latestAt: row[5],
                archivedAt: row[6]
            )
        }
    }

    public func summary(at now: Date) async throws -> StoreSummary {
        countSummaryQuery()
        return try await read { db in
            var live: [EscrowState: Int] = [:]
            for state in EscrowState.live { live[state] = 0 }
            for row in try Row.fetchAll(
                try db.cachedStatement(sql: "SELECT state, COUNT(*) AS n FROM escrow GROUP BY state")
            ) {
                if let state = EscrowState(rawValue: row["state"]) { live[state] = row["n"] }
            }
            let oldest: Int64? = try Int64.fetchOne(db, sql: "SELECT MIN(created_at) FROM escrow")
            let oldestPending: Int64? = try Int64.fetchOne(
                db,
                sql: "SELECT MIN(created_at) FROM escrow WHERE state = ?",
                arguments: [EscrowState.pending.rawValue]
            )
            let overdue =
                try Int.fetchOne(
                    db,
                    sql: "SELECT COUNT(*) FROM escrow WHERE expires_at <= ?",
                    arguments: [Self.ms(now)]
                ) ?? 0
            let dead = try Row.fetchAll(
                db,
                sql: "SELECT id, dead_code FROM escrow WHERE state = ? ORDER BY created_at",
                arguments: [EscrowState.dead.rawValue]
            ).map { row -> DeadEscrow in
                // Every dead row, a quarantined malformed one too: its id column's bytes, whatever they are.
                let id = Data.fromDatabaseValue(row["id"] as DatabaseValue).map { Hex.encode($0) } ?? ""
                return DeadEscrow(
                    idHex: id,
                    code: String.fromDatabaseValue(row["dead_code"] as DatabaseValue).map(DeadCode.init(rawValue:))
                )
            }
            return StoreSummary(
                live: live,
                oldestLiveCreatedAt: Self.date(oldest),
                oldestPendingCreatedAt: Self.date(oldestPending),
                overdue: overdue,
                dead: dead
            )
        }
    }

    /// Reads run synchronously on the calling thread: a read is a few indexed lookups (microseconds),
    /// and GRDB's async read costs a queue hop and a continuation that weigh more than the read itself
    /// (measured: `Component: store.record(blindIndex:)` in Benchmarks). Writes stay async: a write may
    /// wait for a group commit's fsync.
    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do { return try readSynchronously(body) } catch { throw Self.storeError(error, "read failed") }
    }

    private func readSynchronously<T>(_ body: (Database) throws -> T) throws -> T {
        try pool.read(body)
    }
}
