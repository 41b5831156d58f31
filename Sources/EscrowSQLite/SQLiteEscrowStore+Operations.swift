public import EscrowCore
public import EscrowCrypto
public import Foundation
import GRDB

extension SQLiteEscrowStore {
    /// Captures go through the group commit (``CaptureBatcher``): concurrent captures share one
    /// transaction; each returns only once that transaction is committed (`synchronous=FULL`).
    public func capture(
        _ record: EscrowRecord,
        actor: AuditActor,
        lifecycle: EscrowLifecycle
    ) async throws -> CaptureOutcome {
        try requireWritable()
        let outcome = try await batcher.submit(CaptureItem(record: record, actor: actor, lifecycle: lifecycle))
        if case .replaced = outcome { try await purgedOne() }
        return outcome
    }

    /// Writes one batch of the group commit (captures or lifecycle actions) with the store engine: one transaction,
    /// and one transaction an item when that fails (``StoreEngine/writeBatch(_:order:describe:isUnavailable:write:)``).
    /// Blocks the calling thread: for the group-commit queues only.
    static func writeBatch<Item: Sendable, Output: Sendable>(
        _ batch: [Item],
        pool: DatabasePool,
        lock: WriteLock?,
        deadline: ContinuousClock.Instant? = nil,
        _ write: @escaping ([Item], SQLiteWriteTransaction) async throws -> [Output]
    ) -> [Result<Output, any Error>] {
        do {
            return try pool.writeWithoutTransaction { db in
                try InlineTask.run {
                    await StoreEngine.writeBatch(
                        batch,
                        describe: { storeError($0, "write transaction failed") },
                        isUnavailable: { ($0 as? EscrowStoreError)?.code == .unavailable },
                        write: { items in
                            try transaction(db, lock: lock, deadline: deadline) { try await write(items, $0) }
                        }
                    )
                }
            }
        } catch {
            return batch.map { _ in .failure(storeError(error, "write transaction failed")) }
        }
    }

    public func record(id: EscrowID) async throws -> EscrowRecord? {
        try await read { db in try Self.fetchRecord(db, where: "id = ?", [Data(id.bytes)]) }
    }

    public func record(blindIndex: BlindIndex) async throws -> EscrowRecord? {
        try await read { db in try Self.fetchRecord(db, where: "blind_index = ?", [Data(blindIndex.bytes)]) }
    }

    /// Commits go through the group commit (``CommitBatcher``): concurrent outcomes (a replay worker's deliveries,
    /// confirmations) share one transaction and one fsync, each still a compare-and-set on its own revision and
    /// answered only once durable.
    public func commit(_ action: LifecycleAction, id: EscrowID, expectedRevision: Int64) async throws -> Bool {
        if case .ignore = action.change { return false }
        try requireWritable()
        let applied = try await committer.submit(CommitItem(action: action, id: id, expectedRevision: expectedRevision))
        if applied, case .purge = action.change { try await purgedOne() }
        return applied
    }

    public func claimDue(_ request: ClaimRequest, lifecycle: EscrowLifecycle) async throws -> [EscrowRecord] {
        guard request.limit > 0 else { return [] }
        // Leases need not wait for the disk (see `write(durable:)`): the outcome commit that follows is durable.
        return try await write(durable: false) { try await StoreEngine.claim(request, lifecycle: lifecycle, in: $0) }
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
            var result: [UInt32: Int] = [:]
            for row in try Row.fetchAll(
                try db.cachedStatement(sql: "SELECT key_version, COUNT(*) AS n FROM escrow GROUP BY key_version")
            ) {
                // A version outside 32 bits is a malformed row, not a version in use.
                guard let version = (row["key_version"] as Int64?).flatMap({ UInt32(exactly: $0) }) else { continue }
                result[version] = row["n"]
            }
            return result
        }
    }

    public func purgeMalformed(expiredAt now: Date, actor: AuditActor) async throws -> Int {
        let purged = try await write { try await StoreEngine.purgeMalformed(expiredAt: now, actor: actor, in: $0) }
        if purged > 0 { try await purgedOne() }
        return purged
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

    public func commit(_ action: MalformedRowAction, on row: MalformedEscrowRow) async throws -> Bool {
        let applied = try await write { try await StoreEngine.commit(action, on: row, in: $0) }
        if applied, case .delete = action.change { try await purgedOne() }
        return applied
    }

    public func retireKeyVersion(_ version: UInt32, audit: [AuditDraft]) async throws {
        try await write { transaction in
            let db = transaction.db
            let retired = try Bool.fetchOne(
                db,
                sql: "SELECT EXISTS (SELECT 1 FROM retired_key_version WHERE version = ?)",
                arguments: [Int64(version)]
            )
            guard retired != true else { return }
            let inUse =
                try Int.fetchOne(
                    db,
                    sql: "SELECT COUNT(*) FROM escrow WHERE key_version = ?",
                    arguments: [Int64(version)]
                )
                ?? 0
            guard inUse == 0 else {
                throw EscrowStoreError(
                    .keyVersionInUse,
                    "\(inUse) escrow(s) still use master key version \(version); run `keys rewrap` first"
                )
            }
            try db.execute(
                sql: "INSERT INTO retired_key_version (version, retired_at) VALUES (?, ?)",
                arguments: [Int64(version), Timestamp.unixMilliseconds(audit.first?.at ?? Date())]
            )
            try await StoreEngine.append(audit, transaction)
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

    public func appendAudit(_ drafts: [AuditDraft]) async throws {
        try await write { try await StoreEngine.append(drafts, $0) }
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

    /// Reads only the columns the report counts, of captures and purges only: no id, index, actor or hash
    /// strings are made (a report over a million events made four heap strings per event for nothing).
    public func auditTallies(after sequence: Int64, limit: Int) async throws -> [AuditTally] {
        try await read { db in
            let cursor = try Row.fetchCursor(
                db.cachedStatement(
                    sql: """
                        SELECT seq, at, type, detail, age_ms FROM audit_event
                        WHERE seq > ? AND type IN ('captured', 'purged') ORDER BY seq LIMIT ?
                        """
                ),
                arguments: [sequence, limit]
            )
            var tallies: [AuditTally] = []
            tallies.reserveCapacity(min(limit, 65_536))
            while let row = try cursor.next() {
                let type: String = row[2] ?? ""
                let kind: AuditTally.Kind =
                    type == "captured"
                    ? .captured
                    : .purged((row[3] as String?).flatMap(PurgeReason.init(rawValue:)), ageMilliseconds: row[4] ?? 0)
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

    public func planAuditArchive(before time: Date) async throws -> AuditArchivePlan {
        try requireWritable()
        // Reads only, in one read transaction: the head, the checkpoint and the live escrows are one snapshot, and
        // writers go on meanwhile (the commit checks again under the write lock).
        return try await read { db in
            try InlineTask.run {
                try await StoreEngine.planAuditArchive(before: time, in: SQLiteWriteTransaction(db: db))
            }
        }
    }

    public func commitAuditArchive(
        _ plan: AuditArchivePlan,
        checkpoint: AuditCheckpoint,
        audit: [AuditDraft]
    ) async throws {
        try await write {
            try await StoreEngine.commitAuditArchive(plan, checkpoint: checkpoint, audit: audit, in: $0)
        }
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

    public func flushPurged() async throws {
        guard !configuration.readOnly else { return }
        do {
            let lock = writeLock
            _ = try await pool.barrierWriteWithoutTransaction { db in
                try lock?.withLock { try db.checkpoint(.truncate) }
            }
        } catch {
            throw EscrowStoreError(.failed, "WAL checkpoint failed (\(Self.describe(error)))")
        }
    }

    // MARK: - Plumbing

    func purgedOne() async throws {
        if configuration.checkpointAfterPurge { try await flushPurged() }
    }

    /// A write transaction on the writer connection, its body the store engine's (async, run on the writer's thread:
    /// ``InlineTask``). `durable: false` commits without waiting for the disk (`synchronous=NORMAL` for this
    /// transaction only): for what may be lost in a power cut without harm, a claim's leases. Other processes see the
    /// commit at once (it is in the WAL), and the next durable commit syncs the WAL with it; lost in a power cut, the
    /// escrows are simply due again.
    func write<T: Sendable>(
        durable: Bool = true,
        _ body: @escaping @Sendable (SQLiteWriteTransaction) async throws -> T
    ) async throws -> T {
        try requireWritable()
        let lock = writeLock
        do {
            return try await pool.writeWithoutTransaction { db in
                if !durable { try db.execute(sql: "PRAGMA synchronous = NORMAL") }
                defer { if !durable { try? db.execute(sql: "PRAGMA synchronous = FULL") } }
                return try Self.transaction(db, lock: lock, body)
            }
        } catch {
            throw Self.storeError(error, "write transaction failed")
        }
    }

    /// One `BEGIN IMMEDIATE … COMMIT` under the cross-process write lock: the commit, and the automatic
    /// checkpoint SQLite may run at commit, happen while the lock is held. The body, the store engine's async code,
    /// runs on this thread (``InlineTask``). A failed body or commit rolls back, and a disk error stops the store's
    /// writes (``DiskFailure``). Synchronous on purpose: the writer's thread blocks here anyway, and an async version
    /// of this function crashes the Swift 6.3 optimizer (coroutine splitting) in release builds.
    static func transaction<T>(
        _ db: Database,
        lock: WriteLock?,
        deadline: ContinuousClock.Instant? = nil,
        _ body: @escaping (SQLiteWriteTransaction) async throws -> T
    ) throws -> T {
        if let deadline {
            // Waited in this process already (behind its other writes) up to the caller's bound: nothing is written.
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else {
                throw EscrowStoreError(.busy, "the store's writes did not start within this write's bound; try again")
            }
            try lock?.lock(timeout: remaining.inSeconds)
        } else {
            try lock?.lock()
        }
        defer { lock?.unlock() }
        do {
            try db.execute(sql: "BEGIN IMMEDIATE")
            do {
                let result = try InlineTask.run { try await body(SQLiteWriteTransaction(db: db)) }
                try db.execute(sql: "COMMIT")
                return result
            } catch {
                if db.isInsideTransaction { try? db.execute(sql: "ROLLBACK") }
                throw error
            }
        } catch {
            // A failed write or fsync (the commit's, an automatic checkpoint's) stops the store: see DiskFailure.
            lock?.noteFailure(error)
            throw error
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

    func requireWritable() throws(EscrowStoreError) {
        guard !configuration.readOnly else {
            throw EscrowStoreError(.readOnly, "the store at \(path) is open read-only")
        }
    }

    /// Our own errors pass through; a malformed row is `malformed_row`; a disk error (``DiskFailure``) is
    /// `unavailable`, its outcome unknown; SQLite's busy timeout (another process kept the database locked) is
    /// `busy`, nothing written; anything else (GRDB, SQLite) becomes a PII-free `failed`.
    static func storeError(_ error: any Error, _ what: String) -> EscrowStoreError {
        if let error = error as? EscrowStoreError { return error }
        if DiskFailure.isFullDisk(error) {
            return EscrowStoreError(
                .unavailable,
                "\(what): the disk is full (\(describe(error))); nothing was stored (the transaction was rolled back): "
                    + "retry once there is space"
            )
        }
        if DiskFailure.isDiskError(error) {
            return EscrowStoreError(
                .unavailable,
                "\(what) with a disk error (\(describe(error))): whether it is on disk is unknown, and the store "
                    + "takes no more writes until a restart"
            )
        }
        if let error = error as? DatabaseError, error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED {
            return EscrowStoreError(
                .busy,
                "\(what): another connection held the database past the busy timeout (\(describe(error)))"
            )
        }
        if let error = error as? MalformedRow {
            return EscrowStoreError(
                .malformedRow,
                "a stored escrow row is malformed (column \(error.column)); the replay worker moves it to dead"
            )
        }
        return EscrowStoreError(.failed, "\(what) (\(describe(error)))")
    }
}
