public import EscrowCore
public import EscrowCrypto
public import Foundation
import Logging
import PostgresNIO

/// One capture to write.
struct CaptureItem: Sendable {
    let record: EscrowRecord
    let actor: AuditActor
    let lifecycle: EscrowLifecycle
}

/// One lifecycle action to commit with compare-and-set.
struct CommitItem: Sendable {
    let action: LifecycleAction
    let id: EscrowID
    let expectedRevision: Int64
}

extension PostgresEscrowStore {
    /// Captures go through the group commit (``AsyncGroupCommit``): concurrent captures of this node share one
    /// transaction, and each returns only once that transaction's COMMIT returned.
    public func capture(
        _ record: EscrowRecord,
        actor: AuditActor,
        lifecycle: EscrowLifecycle
    ) async throws -> CaptureOutcome {
        try requireWritable()
        return try await captures.submit(CaptureItem(record: record, actor: actor, lifecycle: lifecycle))
    }

    /// Commits go through the group commit too: each is still a compare-and-set on its own revision.
    public func commit(_ action: LifecycleAction, id: EscrowID, expectedRevision: Int64) async throws -> Bool {
        if case .ignore = action.change { return false }
        try requireWritable()
        return try await commits.submit(CommitItem(action: action, id: id, expectedRevision: expectedRevision))
    }

    func requireWritable() throws(EscrowStoreError) {
        guard !configuration.readOnly else {
            throw EscrowStoreError(.readOnly, "the store at \(url) is open read-only")
        }
    }

    /// Writes a batch in one transaction. When it fails, each item is written again in its own transaction, so
    /// only a failing item fails (a retired key version, a broken row in the way). Items are written in the
    /// order of their blind index (captures) or id (commits): two nodes lock the same rows in the same order.
    static func writeBatch<Item: Sendable, Output: Sendable>(
        _ batch: [Item],
        _ database: StoreDatabase,
        what: String,
        order: (Item) -> [UInt8],
        write:
            @escaping @Sendable ([Item], PostgresConnection, inout PendingAudit, inout Set<UInt32>) async throws
            -> [Output]
    ) async -> [Result<Output, any Error>] {
        @Sendable func run(_ items: [(Int, Item)]) async throws -> [(Int, Output)] {
            try await database.transaction(what) { connection in
                var audit = PendingAudit()
                var versions: Set<UInt32> = []
                let outputs = try await write(items.map(\.1), connection, &audit, &versions)
                try await requireUsable(versions, connection, logger: database.logger)
                try await audit.write(connection, logger: database.logger)
                return Array(zip(items.map(\.0), outputs))
            }
        }
        let ordered = batch.enumerated().sorted { order($0.element).lexicographicallyPrecedes(order($1.element)) }
        do {
            var results = [Result<Output, any Error>?](repeating: nil, count: batch.count)
            for (position, output) in try await run(ordered.map { ($0.offset, $0.element) }) {
                results[position] = .success(output)
            }
            return results.map { $0 ?? .failure(EscrowStoreError(.failed, "\(what): no result")) }
        } catch {
            // One by one only when an item may be at fault: a store that cannot be reached fails every item now,
            // rather than each of them after its own wait for a connection.
            let failure = database.storeError(error, what)
            guard batch.count > 1, failure.code != .unavailable else {
                return Array(repeating: .failure(failure), count: batch.count)
            }
            var results: [Result<Output, any Error>] = []
            for (position, item) in batch.enumerated() {
                do {
                    results.append(.success(try await run([(position, item)])[0].1))
                } catch {
                    results.append(.failure(database.storeError(error, what)))
                }
            }
            return results
        }
    }

    typealias CaptureResults = [Result<CaptureOutcome, any Error>]

    static func writeCaptures(_ batch: [CaptureItem], _ database: StoreDatabase) async -> CaptureResults {
        let logger = database.logger
        return await writeBatch(
            batch,
            database,
            what: "capture failed",
            order: { $0.record.blindIndex.bytes },
            write: { items, connection, audit, versions in
                // One multi-row INSERT for the batch (new users, the common case); only the captures it skipped on
                // a blind-index conflict take the one-by-one path, which reads the live escrow and keeps or
                // replaces it. Events are appended in the batch's order either way.
                let created = try await insertNew(items.map(\.record), connection, logger: logger)
                var outcomes: [CaptureOutcome] = []
                for item in items {
                    versions.insert(item.record.sealed.keyVersion)
                    if created.contains(item.record.id) {
                        audit.add([item.lifecycle.captured(item.record, actor: item.actor)])
                        outcomes.append(.created(item.record))
                    } else {
                        outcomes.append(try await capture(item, connection, &audit, logger: logger))
                    }
                }
                return outcomes
            }
        )
    }

    static func writeCommits(_ batch: [CommitItem], _ database: StoreDatabase) async -> [Result<Bool, any Error>] {
        let logger = database.logger
        return await writeBatch(
            batch,
            database,
            what: "commit failed",
            order: { $0.id.bytes },
            write: { items, connection, audit, versions in
                // The batch's purges (a replay's confirmed deliveries, the common case) in one DELETE, one round
                // trip instead of one each; every other action one by one. Events are appended in the batch's
                // order either way, and an escrow purged by two items of one batch is purged by the first only.
                let purges = items.compactMap { item -> (id: EscrowID, revision: Int64)? in
                    guard case .purge = item.action.change else { return nil }
                    return (item.id, item.expectedRevision)
                }
                var deleted = purges.isEmpty ? [:] : try await delete(purges, connection, logger: logger)
                var applied: [Bool] = []
                for item in items {
                    if case .purge(_, let drafts) = item.action.change {
                        let done = deleted[item.id] == item.expectedRevision
                        if done {
                            deleted[item.id] = nil
                            audit.add(drafts)
                        }
                        applied.append(done)
                    } else {
                        applied.append(try await apply(item, connection, &audit, &versions, logger: logger))
                    }
                }
                return applied
            }
        )
    }

    /// One capture inside the caller's transaction. Inserts first (a new user, the common case, costs one
    /// statement); only on a blind-index conflict is the live escrow read (and locked), and kept or replaced.
    static func capture(
        _ item: CaptureItem,
        _ connection: PostgresConnection,
        _ audit: inout PendingAudit,
        logger: Logger
    ) async throws -> CaptureOutcome {
        let record = item.record
        let captured = item.lifecycle.captured(record, actor: item.actor)
        // A live escrow deleted by another node between the insert and the read: insert again.
        for _ in 0..<3 {
            if try await insert(record, connection, ifNoLiveEscrow: true, logger: logger) {
                audit.add([captured])
                return .created(record)
            }
            guard
                let row = try await fetchRow(
                    connection,
                    .blindIndex,
                    record.blindIndex.bytes,
                    forUpdate: true,
                    logger: logger
                )
            else { continue }
            let existing: EscrowRecord
            do throws(MalformedRow) {
                existing = try Self.record(from: row)
            } catch {
                // The user's previous row is broken: it can never be delivered. The new capture replaces it.
                _ = try await handle(
                    .purge(.replaced),
                    on: error,
                    lifecycle: item.lifecycle,
                    at: record.createdAt,
                    actor: item.actor,
                    connection,
                    &audit,
                    logger: logger
                )
                try await insert(record, connection, logger: logger)
                audit.add([captured])
                return .created(record)
            }
            guard let purgeDrafts = try item.lifecycle.replacement(of: existing, by: record, actor: item.actor) else {
                return .unchanged(existing)
            }
            _ = try await delete(id: existing.id, expectedRevision: nil, connection, logger: logger)
            try await insert(record, connection, logger: logger)
            audit.add(purgeDrafts + [captured])
            return .replaced(record, previous: existing.id)
        }
        throw EscrowStoreError(.failed, "the user's live escrow kept changing during the capture; try again")
    }

    /// One lifecycle action inside the caller's transaction, with compare-and-set on its revision.
    static func apply(
        _ item: CommitItem,
        _ connection: PostgresConnection,
        _ audit: inout PendingAudit,
        _ versions: inout Set<UInt32>,
        logger: Logger
    ) async throws -> Bool {
        switch item.action.change {
        case .ignore:
            return false
        case .update(let record, let drafts):
            versions.insert(record.sealed.keyVersion)
            guard try await update(record, expectedRevision: item.expectedRevision, connection, logger: logger) else {
                return false
            }
            audit.add(drafts)
            return true
        case .purge(_, let drafts):
            guard try await delete(id: item.id, expectedRevision: item.expectedRevision, connection, logger: logger)
            else { return false }
            audit.add(drafts)
            return true
        }
    }

    public func claimDue(_ request: ClaimRequest, lifecycle: EscrowLifecycle) async throws -> [EscrowRecord] {
        guard request.limit > 0 else { return [] }
        if let versions = request.keyVersions, versions.isEmpty { return [] }
        let logger = database.logger
        let now = Self.ms(request.now)
        let actor = AuditActor.worker(request.owner)
        // Leases need not wait for the WAL flush (see `StoreDatabase.transaction`): the outcome commit that
        // follows is durable.
        return try await database.transaction("claim failed", durable: false) { connection in
            var audit = PendingAudit()
            var leased: [EscrowRecord] = []
            // Until `limit` leases or nothing more is due: a quarantined row takes no lease and leaves the queue (its
            // due_at is cleared), so broken rows never make a claim look like the end of the work.
            while leased.count < request.limit {
                let want = request.limit - leased.count
                let rows: [PostgresRow]
                if let versions = request.keyVersions {
                    // A version outside 32 bits is no version at all: such rows are selected whatever the filter,
                    // to be quarantined.
                    rows = try await connection.query(
                        """
                        SELECT \(unescaped: Self.escrowColumns) FROM escrow
                        WHERE due_at <= \(now) AND (key_version = ANY(\(versions.sorted().map { Int64($0) }))
                            OR key_version NOT BETWEEN 0 AND 4294967295)
                        ORDER BY due_at LIMIT \(want) FOR UPDATE SKIP LOCKED
                        """,
                        logger: logger
                    ).collect()
                } else {
                    rows = try await connection.query(
                        """
                        SELECT \(unescaped: Self.escrowColumns) FROM escrow WHERE due_at <= \(now)
                        ORDER BY due_at LIMIT \(want) FOR UPDATE SKIP LOCKED
                        """,
                        logger: logger
                    ).collect()
                }
                var quarantined = 0
                // Decided one by one, written together: one UPDATE for the claim's leases, not one each.
                var leases: [(record: EscrowRecord, expectedRevision: Int64, drafts: [AuditDraft])] = []
                for row in rows {
                    let record: EscrowRecord
                    do throws(MalformedRow) {
                        record = try Self.record(from: row)
                    } catch {
                        // A malformed row never stalls delivery for the others: it is moved to dead, alone.
                        _ = try await Self.handle(
                            .quarantine,
                            on: error,
                            lifecycle: lifecycle,
                            at: request.now,
                            actor: actor,
                            connection,
                            &audit,
                            logger: logger
                        )
                        quarantined += 1
                        continue
                    }
                    let action = lifecycle.handle(
                        .lease(owner: request.owner, duration: request.leaseDuration),
                        on: record,
                        at: request.now,
                        actor: actor
                    )
                    guard case .update(let next, let drafts) = action.change else { continue }
                    leases.append((next, record.revision, drafts))
                }
                let written =
                    leases.isEmpty
                    ? []
                    : try await Self.update(
                        leases.map { ($0.record, $0.expectedRevision) },
                        connection,
                        logger: logger
                    )
                for lease in leases where written.contains(lease.record.id) {
                    audit.add(lease.drafts)
                    leased.append(lease.record)
                }
                if rows.count < want || quarantined == 0 { break }
            }
            try await audit.write(connection, logger: logger)
            return leased
        }
    }

    /// Purges, as `expired`, every row past its retention that does not decode into a record, with its `purged`
    /// event; intact rows are the sweep's (through the lifecycle).
    public func purgeMalformed(expiredAt now: Date, actor: AuditActor) async throws -> Int {
        let logger = database.logger
        let cutoff = Self.ms(now)
        return try await database.transaction("purging malformed rows failed") { connection in
            let rows = try await connection.query(
                "SELECT \(unescaped: Self.escrowColumns) FROM escrow WHERE expires_at <= \(cutoff) FOR UPDATE",
                logger: logger
            ).collect()
            var audit = PendingAudit()
            var purged = 0
            for row in rows {
                do throws(MalformedRow) {
                    _ = try Self.record(from: row)
                } catch {
                    if try await Self.handle(
                        .purge(.expired),
                        on: error,
                        lifecycle: EscrowLifecycle(),
                        at: now,
                        actor: actor,
                        connection,
                        &audit,
                        logger: logger
                    ) {
                        purged += 1
                    }
                }
            }
            try await audit.write(connection, logger: logger)
            return purged
        }
    }

    public func retireKeyVersion(_ version: UInt32, audit drafts: [AuditDraft]) async throws {
        let logger = database.logger
        try await database.transaction("retiring a key version failed") { connection in
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
            var audit = PendingAudit()
            audit.add(drafts)
            try await audit.write(connection, logger: logger)
        }
    }

    public func appendAudit(_ drafts: [AuditDraft]) async throws {
        guard !drafts.isEmpty else { return }
        let logger = database.logger
        try await database.transaction("appending audit events failed") { connection in
            var audit = PendingAudit()
            audit.add(drafts)
            try await audit.write(connection, logger: logger)
        }
    }

    /// A no-op. SQLite keeps copies of purged pages in its WAL file until a checkpoint truncates it; PostgreSQL's
    /// copies of a deleted row are dead tuples (until vacuum reuses their space), its WAL and WAL archives, and base
    /// backups: none of them can be cleared from here. What bounds them is key cycling (`keys cycle`): once the
    /// master key version an escrow was sealed to is retired, every such copy is unreadable.
    public func flushPurged() async throws {}
}
