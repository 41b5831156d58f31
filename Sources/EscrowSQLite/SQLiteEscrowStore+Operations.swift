public import EscrowCore
public import EscrowCrypto
public import Foundation
import GRDB

extension SQLiteEscrowStore {
    /// Captures go through the group commit (``CaptureBatcher``): concurrent captures share one
    /// transaction; each returns only once that transaction is committed (`synchronous=FULL`).
    public func capture(_ record: EscrowRecord, actor: AuditActor) async throws -> CaptureOutcome {
        let outcome = try await batcher.submit(record, actor: actor) { batch in
            do {
                // The common case: the whole batch in one transaction.
                return try self.writeSynchronously { db in
                    var audit = try AuditAppender(db)
                    let outcomes = try batch.map { try Self.capture($0.record, actor: $0.actor, db, audit: &audit) }
                    try audit.finish(db)
                    return outcomes.map { .success($0) }
                }
            } catch {
                // One capture failed and rolled the batch back: give each its own transaction, so only
                // the failing one fails.
                var results: [Result<CaptureOutcome, any Error>] = []
                for item in batch {
                    do {
                        results.append(
                            .success(
                                try self.writeSynchronously { db in
                                    var audit = try AuditAppender(db)
                                    let outcome = try Self.capture(item.record, actor: item.actor, db, audit: &audit)
                                    try audit.finish(db)
                                    return outcome
                                }
                            )
                        )
                    } catch {
                        results.append(.failure(error))
                    }
                }
                return results
            }
        }
        if case .replaced = outcome { try await purgedOne() }
        return outcome
    }

    /// One capture inside the caller's transaction. Inserts first (a new user, the common case, costs
    /// one statement); only on a blind-index conflict is the live escrow read, and kept or replaced.
    static func capture(
        _ record: EscrowRecord,
        actor: AuditActor,
        _ db: Database,
        audit: inout AuditAppender
    ) throws
        -> CaptureOutcome
    {
        let captured = AuditDraft(
            type: .captured,
            at: record.createdAt,
            escrowID: record.id.hex,
            indexPrefix: record.blindIndex.prefixHex,
            actor: actor
        )
        if try Self.insert(record, db, ifNoLiveEscrow: true) {
            try audit.append([captured], db)
            return .created(record)
        }
        guard
            let existing = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT * FROM escrow WHERE blind_index = ?"),
                arguments: [Data(record.blindIndex.bytes)]
            ).map(Self.record(from:))
        else { throw EscrowStoreError(.failed, "a blind index conflict without a live escrow") }
        if Hashing.constantTimeEqual(existing.contentTag, record.contentTag) {
            return .unchanged(existing)
        }
        let replacement = AuditDraft(
            type: .replaced,
            at: record.createdAt,
            escrowID: existing.id.hex,
            indexPrefix: existing.blindIndex.prefixHex,
            detail: record.id.hex,
            actor: actor
        )
        guard
            case .purge(_, let purgeDrafts) = EscrowLifecycle().handle(
                .purge(.replaced),
                on: existing,
                at: record.createdAt,
                actor: actor
            )
        else { throw EscrowStoreError(.failed, "cannot replace the previous escrow") }
        try db.cachedStatement(sql: "DELETE FROM escrow WHERE id = ?").execute(arguments: [Data(existing.id.bytes)])
        _ = try Self.insert(record, db)
        try audit.append([replacement] + purgeDrafts + [captured], db)
        return .replaced(record, previous: existing.id)
    }

    public func record(id: EscrowID) async throws -> EscrowRecord? {
        try await read { db in
            try Row.fetchOne(
                try db.cachedStatement(sql: "SELECT * FROM escrow WHERE id = ?"),
                arguments: [Data(id.bytes)]
            )
            .map(Self.record(from:))
        }
    }

    public func record(blindIndex: BlindIndex) async throws -> EscrowRecord? {
        try await read { db in
            try Row.fetchOne(
                try db.cachedStatement(sql: "SELECT * FROM escrow WHERE blind_index = ?"),
                arguments: [Data(blindIndex.bytes)]
            )
            .map(Self.record(from:))
        }
    }

    public func commit(_ action: LifecycleAction, id: EscrowID, expectedRevision: Int64) async throws -> Bool {
        let (applied, purged) = try await write { db -> (Bool, Bool) in
            switch action {
            case .ignore:
                return (false, false)
            case .update(let record, let drafts):
                guard try Self.update(record, expectedRevision: expectedRevision, db) else { return (false, false) }
                try Self.append(drafts, db)
                return (true, false)
            case .purge(_, let drafts):
                try db.cachedStatement(sql: "DELETE FROM escrow WHERE id = ? AND revision = ?").execute(
                    arguments: [Data(id.bytes), expectedRevision]
                )
                guard db.changesCount == 1 else { return (false, false) }
                try Self.append(drafts, db)
                return (true, true)
            }
        }
        if purged { try await purgedOne() }
        return applied
    }

    public func claimDue(
        at now: Date,
        limit: Int,
        owner: String,
        leaseDuration: Double
    ) async throws
        -> [EscrowRecord]
    {
        try await write { db in
            let due = try Row.fetchAll(
                db,
                sql: "SELECT * FROM escrow WHERE due_at <= ? ORDER BY due_at LIMIT ?",
                arguments: [Self.ms(now), limit]
            ).map(Self.record(from:))
            var leased: [EscrowRecord] = []
            for record in due {
                let action = EscrowLifecycle().handle(
                    .lease(owner: owner, duration: leaseDuration),
                    on: record,
                    at: now,
                    actor: .worker(owner)
                )
                guard case .update(let next, let drafts) = action else { continue }
                guard try Self.update(next, expectedRevision: record.revision, db) else { continue }
                try Self.append(drafts, db)
                leased.append(next)
            }
            return leased
        }
    }

    public func records(_ query: RecordQuery, after cursor: EscrowID?, limit: Int) async throws -> [EscrowRecord] {
        let (condition, arguments): (String, StatementArguments) =
            switch query {
            case .all: ("1", [])
            case .expired(let now): ("expires_at <= ?", [AuditChain.milliseconds(now)])
            case .state(let state): ("state = ?", [state.rawValue])
            case .keyVersionOtherThan(let version): ("key_version <> ?", [Int64(version)])
            }
        let after = Data(cursor?.bytes ?? [])
        return try await read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT * FROM escrow WHERE \(condition) AND id > ? ORDER BY id LIMIT ?",
                arguments: arguments + [after, limit]
            ).map(Self.record(from:))
        }
    }

    public func keyVersionsInUse() async throws -> [UInt32: Int] {
        try await read { db in
            var result: [UInt32: Int] = [:]
            for row in try Row.fetchAll(
                try db.cachedStatement(sql: "SELECT key_version, COUNT(*) AS n FROM escrow GROUP BY key_version")
            ) {
                result[UInt32(row["key_version"] as Int64)] = row["n"]
            }
            return result
        }
    }

    public func appendAudit(_ drafts: [AuditDraft]) async throws {
        try await write { db in try Self.append(drafts, db) }
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

    public func auditHead() async throws -> AuditHead? {
        try await read { db in
            try Row.fetchOne(try db.cachedStatement(sql: "SELECT seq, hash FROM audit_head WHERE singleton = 1"))
                .map { AuditHead(sequence: $0["seq"], hash: [UInt8]($0["hash"] as Data)) }
        }
    }

    public func summary(at now: Date) async throws -> StoreSummary {
        try await read { db in
            var live: [EscrowState: Int] = [:]
            for state in EscrowState.live { live[state] = 0 }
            for row in try Row.fetchAll(
                try db.cachedStatement(sql: "SELECT state, COUNT(*) AS n FROM escrow GROUP BY state")
            ) {
                if let state = EscrowState(rawValue: row["state"]) { live[state] = row["n"] }
            }
            let oldest = try Int64.fetchOne(db, sql: "SELECT MIN(created_at) FROM escrow")
            let oldestPending = try Int64.fetchOne(
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
            ).compactMap { row -> DeadEscrow? in
                guard let id = EscrowID(bytes: [UInt8](row["id"] as Data)) else { return nil }
                return DeadEscrow(id: id, code: (row["dead_code"] as String?).map(DeadCode.init(rawValue:)))
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
            _ = try await pool.barrierWriteWithoutTransaction { db in
                try db.checkpoint(.truncate)
            }
        } catch {
            throw EscrowStoreError(.failed, "WAL checkpoint failed (\(Self.describe(error)))")
        }
    }

    // MARK: - Plumbing

    private func purgedOne() async throws {
        if configuration.checkpointAfterPurge { try await flushPurged() }
    }

    /// A write transaction that blocks the calling thread: for the group-commit queue only (never call it
    /// from a Swift task: it would hold a cooperative thread for an fsync).
    func writeSynchronously<T>(_ body: (Database) throws -> T) throws -> T {
        try requireWritable()
        do { return try pool.write(body) } catch { throw Self.storeError(error, "write transaction failed") }
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try requireWritable()
        do { return try await pool.write(body) } catch { throw Self.storeError(error, "write transaction failed") }
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

    private func requireWritable() throws(EscrowStoreError) {
        guard !configuration.readOnly else {
            throw EscrowStoreError(.readOnly, "the store at \(path) is open read-only")
        }
    }

    /// Our own errors pass through; anything else (GRDB, SQLite) becomes a PII-free `failed`.
    private static func storeError(_ error: any Error, _ what: String) -> EscrowStoreError {
        (error as? EscrowStoreError) ?? EscrowStoreError(.failed, "\(what) (\(describe(error)))")
    }
}
