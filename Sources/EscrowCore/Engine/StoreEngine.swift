package import EscrowCrypto
package import Foundation

/// One capture to write.
package struct CaptureItem: Sendable {
    package let record: EscrowRecord
    package let actor: AuditActor
    package let lifecycle: EscrowLifecycle
    /// The `captured` event's detail: how the profile came, when not by a capture call (``webSignIn``, which the
    /// engine sets on a web sign-in's capture).
    package var detail: String?
    /// The outbox entry of the Apple authorization code that came with the profile, made for the escrow that holds
    /// it (``StoreEngine/captureQueueingCodes(_:in:)``); nil for a capture without one.
    package var appleExchange: (@Sendable (EscrowID) -> AppleTokenExchange)?

    /// The detail of a capture made by a web sign-in's callback.
    package static let webSignIn = "web-signin"

    package init(
        record: EscrowRecord,
        actor: AuditActor,
        lifecycle: EscrowLifecycle,
        appleExchange: (@Sendable (EscrowID) -> AppleTokenExchange)? = nil
    ) {
        self.record = record
        self.actor = actor
        self.lifecycle = lifecycle
        self.appleExchange = appleExchange
    }
}

/// One lifecycle action to commit with compare-and-set on the escrow's revision.
package struct CommitItem: Sendable {
    package let action: LifecycleAction
    package let id: EscrowID
    package let expectedRevision: Int64

    package init(action: LifecycleAction, id: EscrowID, expectedRevision: Int64) {
        self.action = action
        self.id = id
        self.expectedRevision = expectedRevision
    }
}

/// A stored row that does not decode into a record, as a store's driver met it: its row address and the first
/// column that breaks a rule. ``EscrowWriteTransaction/malformedRow(_:)`` tells the rest.
package struct MalformedRow: Error, Sendable, Equatable {
    /// The store's own address of the row (SQLite's `rowid`, PostgreSQL's `row_id`).
    package let rowID: Int64
    package let column: String

    package init(rowID: Int64, column: String) {
        self.rowID = rowID
        self.column = column
    }
}

/// A stored escrow row as a driver read it: a record, or a malformed row.
package enum StoredEscrow: Sendable {
    case record(EscrowRecord)
    case malformed(MalformedRow)
}

/// One open write transaction of a store: the store's SQL and nothing else. ``StoreEngine`` decides, over any
/// store, everything a write does; a store implements these statements and runs the engine inside its own
/// transactions and group commits (GRDB's `DatabaseWriter` plays the same part for `DatabaseQueue` and
/// `DatabasePool`).
package protocol EscrowWriteTransaction {
    /// Inserts `records`, skipping each whose user already has a live escrow (or appears earlier in `records`);
    /// returns the ids inserted.
    func insertIfNoLiveEscrow(_ records: [EscrowRecord]) async throws -> Set<EscrowID>
    /// Inserts a record whose user has no live escrow (any previous one was deleted in this transaction).
    func insert(_ record: EscrowRecord) async throws
    /// The user's live row, locked until the transaction ends where the store locks rows.
    func liveRow(blindIndex: BlindIndex) async throws -> StoredEscrow?
    /// Up to `limit` rows due at `now`, oldest due first, locked (skipping rows other transactions hold) where the
    /// store locks rows. With `keyVersions`, only rows sealed to those versions, and rows whose version is no
    /// 32-bit value at all (to be quarantined).
    func dueRows(at now: Date, keyVersions: Set<UInt32>?, limit: Int) async throws -> [StoredEscrow]
    /// Every row past its retention at `now`, locked where the store locks rows.
    func expiredRows(at now: Date) async throws -> [StoredEscrow]
    /// Rewrites each record whose row is still at its expected revision (compare-and-set); returns the ids it
    /// rewrote. The records are of distinct escrows.
    func update(_ changes: [(record: EscrowRecord, expectedRevision: Int64)]) async throws -> Set<EscrowID>
    /// Deletes each row still at its revision; returns the pairs deleted. A pair given twice is deleted once.
    func delete(_ rows: [(id: EscrowID, revision: Int64)]) async throws -> [EscrowID: Int64]
    /// What is known of a malformed row, locked where the store locks rows; nil when it is gone.
    func malformedRow(_ row: MalformedRow) async throws -> MalformedEscrowRow?
    /// Applies a malformed row's action to the row at `rowID`; returns whether the row was there.
    func apply(_ action: MalformedRowAction, toRowID rowID: Int64) async throws -> Bool
    /// Throws ``EscrowStoreError/Code/keyVersionRetired`` when one of `versions` is retired. Called after the
    /// transaction's writes.
    func requireUsable(_ versions: Set<UInt32>) async throws
    /// The audit chain's head, locked until the transaction ends (appends of every process serialize on it); nil
    /// before the first event.
    func lockAuditHead() async throws -> AuditHead?
    /// Inserts chained events and records `head`, the last one's sequence and hash.
    func insertAudit(_ events: [AuditEvent], head: AuditHead) async throws
    /// The audit chain's head as it is now, without locking it; nil before the first event.
    func auditHead() async throws -> AuditHead?
    /// The checkpoint of the newest archive cut; nil when nothing was ever archived.
    func auditCheckpoint() async throws -> AuditCheckpoint?
    /// The lowest sequence above `sequence` of an event at or after `milliseconds` (since 1970); nil when none.
    func firstAuditSequence(after sequence: Int64, atOrAfter milliseconds: Int64) async throws -> Int64?
    /// The lowest sequence above `sequence` of an event of an escrow that still has a row (any state); nil when none.
    func firstLiveEscrowAuditSequence(after sequence: Int64) async throws -> Int64?
    /// The stored hash of the event at `sequence`; nil when there is none.
    func auditHash(at sequence: Int64) async throws -> [UInt8]?
    /// Deletes the events with a sequence in `range`; returns how many.
    func deleteAudit(_ range: ClosedRange<Int64>) async throws -> Int
    /// Records a cut's checkpoint.
    func insertCheckpoint(_ checkpoint: AuditCheckpoint) async throws
}

/// What every store decides, written once over ``EscrowWriteTransaction``: capture with replacement, compare-and-set
/// commits, the claim and its quarantine of malformed rows, how audit events join the chain, and a batch's fallback
/// to single items. The lifecycle decides how each escrow changes; the engine decides which rows to touch and in
/// which order, and the store only runs the statements.
package enum StoreEngine {
    /// Captures `items` in the caller's transaction, in order. One insert for the new users (the common case);
    /// only a capture whose user already has a live escrow reads it, then keeps it (same content), replaces it, or
    /// deletes it when it is malformed. The audit events are added to `audit` in the batch's order; the caller
    /// appends them and checks the records' key versions (``EscrowWriteTransaction/requireUsable(_:)``) after its own
    /// writes, once for all (a group commit's batch: ``captureQueueingCodes(_:in:)``).
    package static func capture(
        _ items: [CaptureItem],
        in transaction: some EscrowWriteTransaction,
        auditing audit: inout [AuditDraft]
    ) async throws -> [CaptureOutcome] {
        let created = try await transaction.insertIfNoLiveEscrow(items.map(\.record))
        var outcomes: [CaptureOutcome] = []
        outcomes.reserveCapacity(items.count)
        for item in items {
            if created.contains(item.record.id) {
                audit.append(item.lifecycle.captured(item.record, actor: item.actor, detail: item.detail))
                outcomes.append(.created(item.record))
            } else {
                outcomes.append(try await captureOverLive(item, transaction, &audit))
            }
        }
        return outcomes
    }

    /// A capture whose user has (or just had) a live escrow.
    private static func captureOverLive(
        _ item: CaptureItem,
        _ transaction: some EscrowWriteTransaction,
        _ audit: inout [AuditDraft]
    ) async throws -> CaptureOutcome {
        let record = item.record
        let captured = item.lifecycle.captured(record, actor: item.actor, detail: item.detail)
        // The live escrow may be deleted by another writer between the insert and the read: insert again.
        for _ in 0..<3 {
            switch try await transaction.liveRow(blindIndex: record.blindIndex) {
            case nil:
                if try await transaction.insertIfNoLiveEscrow([record]).contains(record.id) {
                    audit.append(captured)
                    return .created(record)
                }
            case .malformed(let malformed):
                // The user's previous row is broken: it can never be delivered. The new capture replaces it.
                _ = try await handle(
                    .purge(.replaced),
                    on: malformed,
                    lifecycle: item.lifecycle,
                    at: record.createdAt,
                    actor: item.actor,
                    transaction,
                    &audit
                )
                try await transaction.insert(record)
                audit.append(captured)
                return .created(record)
            case .record(let existing):
                guard let purge = try item.lifecycle.replacement(of: existing, by: record, actor: item.actor) else {
                    return .unchanged(existing)
                }
                guard try await transaction.delete([(existing.id, existing.revision)])[existing.id] != nil else {
                    continue
                }
                try await transaction.insert(record)
                audit += purge + [captured]
                return .replaced(record, previous: existing.id)
            }
        }
        throw EscrowStoreError(.failed, "the user's live escrow kept changing during the capture; try again")
    }

    /// Commits lifecycle actions in the caller's transaction, each a compare-and-set on its own revision; returns
    /// whether each applied. The purges (a replay's confirmed deliveries, the common case) go in one statement where
    /// the store batches; an escrow purged by two items of one batch is purged by the first only. Events join the
    /// chain in the batch's order.
    package static func commit(
        _ items: [CommitItem],
        in transaction: some EscrowWriteTransaction
    ) async throws -> [Bool] {
        let purges = items.compactMap { item -> (id: EscrowID, revision: Int64)? in
            guard case .purge = item.action.change else { return nil }
            return (item.id, item.expectedRevision)
        }
        var deleted = purges.isEmpty ? [:] : try await transaction.delete(purges)
        var audit: [AuditDraft] = []
        var versions: Set<UInt32> = []
        var applied: [Bool] = []
        applied.reserveCapacity(items.count)
        for item in items {
            switch item.action.change {
            case .ignore:
                applied.append(false)
            case .purge(_, let drafts):
                let done = deleted[item.id] == item.expectedRevision
                if done {
                    deleted[item.id] = nil
                    audit += drafts
                }
                applied.append(done)
            case .update(let record, let drafts):
                versions.insert(record.sealed.keyVersion)
                let done = try await transaction.update([(record, item.expectedRevision)]).contains(record.id)
                if done { audit += drafts }
                applied.append(done)
            }
        }
        try await transaction.requireUsable(versions)
        try await append(audit, transaction)
        return applied
    }

    /// Leases up to `request.limit` due escrows with the action `lifecycle` gives for `.lease`, in the caller's
    /// transaction. A malformed row met on the way is quarantined through the lifecycle and takes no lease; it
    /// leaves the queue, so broken rows never make a claim look like the end of the work: the claim goes on until
    /// `limit` leases or nothing more is due.
    package static func claim(
        _ request: ClaimRequest,
        lifecycle: EscrowLifecycle,
        in transaction: some EscrowWriteTransaction
    ) async throws -> [EscrowRecord] {
        guard request.limit > 0 else { return [] }
        if let versions = request.keyVersions, versions.isEmpty { return [] }
        let actor = AuditActor.worker(request.owner)
        var audit: [AuditDraft] = []
        var leased: [EscrowRecord] = []
        while leased.count < request.limit {
            let want = request.limit - leased.count
            let rows = try await transaction.dueRows(at: request.now, keyVersions: request.keyVersions, limit: want)
            var quarantined = 0
            // Decided one by one, written together: one statement for the claim's leases where the store batches.
            var leases: [(record: EscrowRecord, expectedRevision: Int64)] = []
            var leaseDrafts: [EscrowID: [AuditDraft]] = [:]
            for row in rows {
                switch row {
                case .malformed(let malformed):
                    _ = try await handle(
                        .quarantine,
                        on: malformed,
                        lifecycle: lifecycle,
                        at: request.now,
                        actor: actor,
                        transaction,
                        &audit
                    )
                    quarantined += 1
                case .record(let record):
                    let action = lifecycle.handle(
                        .lease(owner: request.owner, duration: request.leaseDuration),
                        on: record,
                        at: request.now,
                        actor: actor
                    )
                    guard case .update(let next, let drafts) = action.change else { continue }
                    leaseDrafts[next.id] = drafts
                    leases.append((next, record.revision))
                }
            }
            let written = leases.isEmpty ? [] : try await transaction.update(leases)
            for lease in leases where written.contains(lease.record.id) {
                audit += leaseDrafts[lease.record.id] ?? []
                leased.append(lease.record)
            }
            if rows.count < want || quarantined == 0 { break }
        }
        try await append(audit, transaction)
        return leased
    }

    /// Deletes, as `expired`, every row past its retention at `now` that does not decode into a record, with the
    /// action `lifecycle` gives; intact rows are the sweep's. Returns how many.
    package static func purgeMalformed(
        expiredAt now: Date,
        actor: AuditActor,
        lifecycle: EscrowLifecycle,
        in transaction: some EscrowWriteTransaction
    ) async throws -> Int {
        var audit: [AuditDraft] = []
        var purged = 0
        for case .malformed(let malformed) in try await transaction.expiredRows(at: now) {
            if try await handle(
                .purge(.expired),
                on: malformed,
                lifecycle: lifecycle,
                at: now,
                actor: actor,
                transaction,
                &audit
            ) {
                purged += 1
            }
        }
        try await append(audit, transaction)
        return purged
    }

    /// Applies a malformed row's action (the lifecycle's) in the caller's transaction; returns whether the row was
    /// there.
    package static func commit(
        _ action: MalformedRowAction,
        on row: MalformedEscrowRow,
        in transaction: some EscrowWriteTransaction
    ) async throws -> Bool {
        guard try await transaction.apply(action, toRowID: row.rowID) else { return false }
        try await append(action.auditDrafts, transaction)
        return true
    }

    /// Reads what is known of a malformed row and applies the lifecycle's action for `event`.
    private static func handle(
        _ event: MalformedRowEvent,
        on malformed: MalformedRow,
        lifecycle: EscrowLifecycle,
        at now: Date,
        actor: AuditActor,
        _ transaction: some EscrowWriteTransaction,
        _ audit: inout [AuditDraft]
    ) async throws -> Bool {
        guard let row = try await transaction.malformedRow(malformed) else { return false }
        let action = lifecycle.handle(event, on: row, at: now, actor: actor)
        guard try await transaction.apply(action, toRowID: row.rowID) else { return false }
        audit += action.auditDrafts
        return true
    }

    /// Appends events to the chain in the caller's transaction: the head is locked last, after the transaction's
    /// row changes, so it is held only for the inserts and the commit. A failed append fails the transaction.
    package static func append(_ drafts: [AuditDraft], _ transaction: some EscrowWriteTransaction) async throws {
        guard !drafts.isEmpty else { return }
        var chain = AuditChainAppender(continuing: try await transaction.lockAuditHead())
        let events = drafts.map { chain.append($0) }
        try await transaction.insertAudit(events, head: chain.head)
    }

    /// Writes a batch of a group commit with `write` (one transaction), and when that fails, each item again in a
    /// transaction of its own, so that only a failing item fails (a retired key version, a broken row in the way).
    /// A store that cannot be reached (`isUnavailable`) fails every item at once instead, rather than each after
    /// its own wait. `order`, when given, sorts the items of a transaction (two writers then lock the same rows in
    /// the same order); results come back in the batch's order. `describe` makes an error PII-free.
    package static func writeBatch<Item: Sendable, Output: Sendable>(
        _ batch: [Item],
        order: ((Item) -> [UInt8])? = nil,
        describe: (any Error) -> any Error,
        isUnavailable: (any Error) -> Bool,
        write: ([Item]) async throws -> [Output]
    ) async -> [Result<Output, any Error>] {
        let ordered =
            order.map { order in batch.indices.sorted { order(batch[$0]).lexicographicallyPrecedes(order(batch[$1])) } }
            ?? Array(batch.indices)
        do {
            let outputs = try await write(ordered.map { batch[$0] })
            var results = [Result<Output, any Error>?](repeating: nil, count: batch.count)
            for (position, output) in zip(ordered, outputs) { results[position] = .success(output) }
            return results.map { $0 ?? .failure(EscrowStoreError(.failed, "the batch returned no result")) }
        } catch {
            let failure = describe(error)
            guard batch.count > 1, !isUnavailable(failure) else {
                return Array(repeating: .failure(failure), count: batch.count)
            }
            var results: [Result<Output, any Error>] = []
            results.reserveCapacity(batch.count)
            for item in batch {
                do {
                    guard let output = try await write([item]).first else {
                        throw EscrowStoreError(.failed, "the write returned no result")
                    }
                    results.append(.success(output))
                } catch {
                    results.append(.failure(describe(error)))
                }
            }
            return results
        }
    }
}

/// Numbers and hashes events as they join the chain after `head`: the one place an event's sequence and hash are
/// made.
package struct AuditChainAppender: Sendable {
    package private(set) var head: AuditHead

    package init(continuing head: AuditHead?) {
        self.head = head ?? AuditHead(sequence: 0, hash: AuditChain.genesis)
    }

    /// The last prefix commitment made, for the escrow id and prefix it was made of: the events of one change
    /// (a confirmed delivery's three) share both, so it is hashed once.
    private var lastCommitment: (escrowID: String?, indexPrefix: String, commitment: String)?

    package mutating func append(_ draft: AuditDraft) -> AuditEvent {
        let sequence = head.sequence + 1
        // The current encoding hashes the prefix's commitment, not the prefix (v2 and later).
        let hash = AuditChain.hash(
            previous: head.hash,
            sequence: sequence,
            draft: draft,
            prefixCommitment: draft.indexPrefix.map { commitment(escrowID: draft.escrowID, indexPrefix: $0) },
            encoding: .current
        )
        head = AuditHead(sequence: sequence, hash: hash)
        return AuditEvent(sequence: sequence, draft: draft, hash: hash, encoding: .current)
    }

    private mutating func commitment(escrowID: String?, indexPrefix: String) -> String {
        if let last = lastCommitment, last.escrowID == escrowID, last.indexPrefix == indexPrefix {
            return last.commitment
        }
        let made = AuditChain.prefixCommitment(escrowID: escrowID, indexPrefix: indexPrefix)
        lastCommitment = (escrowID, indexPrefix, made)
        return made
    }
}
