public import EscrowCore
public import EscrowCrypto
public import Foundation
import Logging
import PostgresNIO

extension PostgresEscrowStore {
    /// Captures go through the group commit (``GroupCommit``): concurrent captures of this node share one
    /// transaction, and each returns only once that transaction's COMMIT returned.
    public func capture(
        _ record: EscrowRecord,
        actor: AuditActor,
        lifecycle: EscrowLifecycle
    ) async throws -> CaptureOutcome {
        try requireWritable()
        return try await captures.submit(
            CaptureItem(record: record, actor: actor, lifecycle: lifecycle),
            deadline: StoreDatabase.callerDeadline
        )
    }

    /// Commits go through the group commit too: each is still a compare-and-set on its own revision.
    public func commit(_ action: LifecycleAction, id: EscrowID, expectedRevision: Int64) async throws -> Bool {
        if case .ignore = action.change { return false }
        try requireWritable()
        return try await commits.submit(
            CommitItem(action: action, id: id, expectedRevision: expectedRevision),
            deadline: StoreDatabase.callerDeadline
        )
    }

    func requireWritable() throws(EscrowStoreError) {
        guard !configuration.readOnly else {
            throw EscrowStoreError(.readOnly, "the store at \(url) is open read-only")
        }
    }

    /// One transaction whose body is the store engine's, over this connection's statements.
    static func engineTransaction<T: Sendable>(
        _ database: StoreDatabase,
        _ what: String,
        durable: Bool = true,
        _ body: @escaping @Sendable (PostgresWriteTransaction) async throws -> T
    ) async throws -> T {
        let logger = database.logger
        return try await database.transaction(what, durable: durable) { connection in
            try await body(PostgresWriteTransaction(connection: connection, logger: logger))
        }
    }

    /// A group commit of this store: a batch is written in one transaction by the store engine (`write`), and one
    /// an item when that fails, under the deadline of its oldest caller (the operations' bound from its call, or the
    /// deadline it brought). Items are written in their ``LockOrdered`` order: two nodes lock the same rows in the
    /// same order.
    static func groupCommit<Item: LockOrdered, Output: Sendable>(
        _ database: StoreDatabase,
        _ batching: (maximumBatch: Int, bound: Duration),
        _ what: String,
        write: @escaping @Sendable ([Item], PostgresWriteTransaction) async throws -> [Output]
    ) -> GroupCommit<Item, Output> {
        GroupCommit(
            maximumBatch: batching.maximumBatch,
            bound: batching.bound,
            writer: .async { batch, deadline in
                await StoreDatabase.$callerDeadline.withValue(deadline) {
                    await StoreEngine.writeBatch(
                        batch,
                        order: { $0.lockOrder },
                        describe: { database.storeError($0, what) },
                        isUnavailable: { ($0 as? EscrowStoreError)?.code == .unavailable },
                        write: { items in try await engineTransaction(database, what) { try await write(items, $0) } }
                    )
                }
            }
        )
    }

    public func claimDue(_ request: ClaimRequest, lifecycle: EscrowLifecycle) async throws -> [EscrowRecord] {
        guard request.limit > 0 else { return [] }
        // Leases need not wait for the WAL flush (see `StoreDatabase.transaction`): the outcome commit that follows is
        // durable.
        return try await Self.engineTransaction(database, "claim failed", durable: false) {
            try await StoreEngine.claim(request, lifecycle: lifecycle, in: $0)
        }
    }

    /// Purges, as `expired`, every row past its retention that does not decode into a record, through the
    /// lifecycle; intact rows are the sweep's.
    public func purgeMalformed(
        expiredAt now: Date,
        actor: AuditActor,
        lifecycle: EscrowLifecycle
    ) async throws -> Int {
        try await Self.engineTransaction(database, "purging malformed rows failed") {
            try await StoreEngine.purgeMalformed(expiredAt: now, actor: actor, lifecycle: lifecycle, in: $0)
        }
    }

    public func commit(_ action: MalformedRowAction, on row: MalformedEscrowRow) async throws -> Bool {
        try requireWritable()
        return try await Self.engineTransaction(database, "changing a malformed row failed") {
            try await StoreEngine.commit(action, on: row, in: $0)
        }
    }

    public func retireKeyVersion(_ version: UInt32, audit drafts: [AuditDraft]) async throws {
        try await Self.engineTransaction(database, "retiring a key version failed") { transaction in
            let connection = transaction.connection
            let logger = transaction.logger
            let retired = try await connection.query(
                "SELECT 1 FROM retired_key_version WHERE version = \(Int64(version))",
                logger: logger
            ).collect()
            guard retired.isEmpty else { return }
            // Waits for every transaction writing escrows to end, and holds new ones until this one commits:
            // the count below sees every escrow, and no capture sealed to this version can slip in after it.
            try await connection.query("LOCK TABLE escrow IN SHARE MODE", logger: logger)
            let inUse =
                try await connection.query(
                    "SELECT COUNT(*) FROM escrow WHERE key_version = \(Int64(version))",
                    logger: logger
                ).collect().map { try $0.decode(Int64.self) }.first ?? 0
            guard inUse == 0 else {
                throw EscrowStoreError(
                    .keyVersionInUse,
                    "\(inUse) escrow(s) still use master key version \(version); run `keys rewrap` first"
                )
            }
            let queued = try self.countsByVersion(
                try await connection.query(PostgresQuery(unsafeSQL: QueuedSealedItems.countsByVersion), logger: logger)
                    .collect()
            )[version] ?? 0
            guard queued == 0 else { throw QueuedSealedItems.inUse(queued, version: version) }
            let at = Self.ms(drafts.first?.at ?? Date())
            let inserted = try await connection.query(
                """
                INSERT INTO retired_key_version (version, retired_at) VALUES (\(Int64(version)), \(at))
                ON CONFLICT (version) DO NOTHING RETURNING 1
                """,
                logger: logger
            ).collect()
            // Another node retired it meanwhile: nothing to append.
            guard inserted.count == 1 else { return }
            try await StoreEngine.append(drafts, transaction)
        }
    }

    public func appendAudit(_ drafts: [AuditDraft]) async throws {
        guard !drafts.isEmpty else { return }
        try await Self.engineTransaction(database, "appending audit events failed") {
            try await StoreEngine.append(drafts, $0)
        }
    }

    public func planAuditArchive(before time: Date) async throws -> AuditArchivePlan {
        try requireWritable()
        return try await Self.engineTransaction(database, "planning the audit archive failed", durable: false) {
            try await StoreEngine.planAuditArchive(before: time, in: $0)
        }
    }

    public func commitAuditArchive(
        _ plan: AuditArchivePlan,
        checkpoint: AuditCheckpoint,
        audit: [AuditDraft]
    ) async throws {
        try requireWritable()
        try await Self.engineTransaction(database, "archiving audit events failed") {
            try await StoreEngine.commitAuditArchive(plan, checkpoint: checkpoint, audit: audit, in: $0)
        }
    }

    /// A no-op. SQLite keeps copies of purged pages in its WAL file until a checkpoint truncates it; PostgreSQL's
    /// copies of a deleted row are dead tuples (until vacuum reuses their space), its WAL and WAL archives, and base
    /// backups: none of them can be cleared from here. What bounds them is key cycling (`keys cycle`): once the
    /// master key version an escrow was sealed to is retired, every such copy is unreadable.
    public func flushPurged() async throws {}
}

/// The order in which a PostgreSQL group commit writes its items, by the rows each locks: two nodes' batches lock
/// them in the same order, and do not deadlock on each other.
protocol LockOrdered: Sendable {
    var lockOrder: [UInt8] { get }
}

extension CaptureItem: LockOrdered {
    /// The blind index: the unique index entry of the user's live escrow.
    var lockOrder: [UInt8] { record.blindIndex.bytes }
}

extension CommitItem: LockOrdered {
    /// The escrow id: its row.
    var lockOrder: [UInt8] { id.bytes }
}

extension SignInCompletionItem: LockOrdered {
    /// The state hash: the attempt's row, locked `FOR UPDATE`.
    var lockOrder: [UInt8] { request.stateHash }
}
