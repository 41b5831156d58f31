public import EscrowCore
public import EscrowCrypto
public import Foundation
import GRDB
import NIOConcurrencyHelpers

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
    /// Blocks the calling thread: for the group-commit queues only. `durable: false` as for ``write(durable:_:)``.
    static func writeBatch<Item: Sendable, Output: Sendable>(
        _ batch: [Item],
        pool: DatabasePool,
        lock: WriteLock?,
        deadline: ContinuousClock.Instant? = nil,
        durable: Bool = true,
        _ write: @escaping ([Item], SQLiteWriteTransaction) async throws -> [Output]
    ) -> [Result<Output, any Error>] {
        do {
            return try pool.writeWithoutTransaction { db in
                try synchronous(db, durable: durable) {
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
            }
        } catch {
            return batch.map { _ in .failure(storeError(error, "write transaction failed")) }
        }
    }

    /// Runs `body` with the writer connection's commits waiting for the disk (`synchronous=FULL`, the store's
    /// setting) or, when not `durable`, not (`NORMAL`, for `body` only).
    ///
    /// SQLite refuses to switch inside a transaction, which a failed `ROLLBACK` can leave open: a connection whose
    /// switch back failed is remembered, and its next durable write switches it first, or fails without writing.
    static func synchronous<T>(_ db: Database, durable: Bool, _ body: () throws -> T) throws -> T {
        let connection = ObjectIdentifier(db)
        if durable {
            if connectionsLeftNormal.withLockedValue({ $0.contains(connection) }) {
                try db.execute(sql: "PRAGMA synchronous = FULL")
                _ = connectionsLeftNormal.withLockedValue { $0.remove(connection) }
            }
            return try body()
        }
        try db.execute(sql: "PRAGMA synchronous = NORMAL")
        defer {
            do {
                try db.execute(sql: "PRAGMA synchronous = FULL")
            } catch {
                _ = connectionsLeftNormal.withLockedValue { $0.insert(connection) }
            }
        }
        return try body()
    }

    /// Writer connections whose switch back to `synchronous=FULL` failed (``synchronous(_:durable:_:)``).
    private static let connectionsLeftNormal = NIOLockedValueBox<Set<ObjectIdentifier>>([])

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

    public func purgeMalformed(
        expiredAt now: Date,
        actor: AuditActor,
        lifecycle: EscrowLifecycle
    ) async throws -> Int {
        let purged = try await write {
            try await StoreEngine.purgeMalformed(expiredAt: now, actor: actor, lifecycle: lifecycle, in: $0)
        }
        if purged > 0 { try await purgedOne() }
        return purged
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
            let queued = try Self.queuedItemsSealed(db)[version] ?? 0
            guard queued == 0 else { throw QueuedSealedItems.inUse(queued, version: version) }
            try db.execute(
                sql: "INSERT INTO retired_key_version (version, retired_at) VALUES (?, ?)",
                arguments: [Int64(version), Timestamp.unixMilliseconds(audit.first?.at ?? Date())]
            )
            try await StoreEngine.append(audit, transaction)
        }
    }

    public func appendAudit(_ drafts: [AuditDraft]) async throws {
        try await write { try await StoreEngine.append(drafts, $0) }
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
                try Self.synchronous(db, durable: durable) { try Self.transaction(db, lock: lock, body) }
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

    func requireWritable() throws(EscrowStoreError) {
        guard !configuration.readOnly else {
            throw EscrowStoreError(.readOnly, "the store at \(path) is open read-only")
        }
    }
}
