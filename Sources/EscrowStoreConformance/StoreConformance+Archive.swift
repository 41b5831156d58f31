import EscrowCore
import EscrowCrypto
import Foundation

/// Archive cuts: a prefix of the chain, never an event of a live escrow, a checkpoint the store's chain verifies from.
extension StoreConformance {
    static let archiveChecks: [Check] = [
        Check(name: "an archive cut is a prefix without live escrows' events", escrows: archiveCutIsAPrefix),
        Check(name: "archive cuts chain into each other and refuse a stale plan", escrows: archiveCutsChain),
        Check(name: "archiving while captures run keeps every live escrow's events", escrows: archiveDuringCaptures),
    ]

    /// Purges `record` (confirmed) at `at`.
    static func purge(_ record: EscrowRecord, at: Date, in store: any EscrowStore) async throws {
        let action = EscrowLifecycle().handle(.confirm, on: record, at: at, actor: .cli)
        try expect(try await store.commit(action, id: record.id, expectedRevision: record.revision), "purge applies")
    }

    /// Writes the plan's segment in memory (verified line by line as it is read back) and commits the cut.
    @discardableResult
    static func cut(
        _ plan: AuditArchivePlan,
        of store: any EscrowStore,
        at now: Date
    ) async throws -> (checkpoint: AuditCheckpoint, lines: [[UInt8]]) {
        let encoder = AuditSegmentEncoder(
            header: AuditSegment.Header(
                firstSequence: plan.firstSequence,
                previousHash: plan.previousHash,
                createdAt: Timestamp.unixMilliseconds(now),
                before: Timestamp.unixMilliseconds(now),
                redacted: true
            )
        )
        var lines = [encoder.headerLine()]
        var cursor = plan.firstSequence - 1
        while cursor < plan.lastSequence {
            let page = try await store.auditEvents(after: cursor, limit: 5)
            guard let last = page.last else { break }
            for event in page where event.sequence <= plan.lastSequence { lines.append(try encoder.line(for: event)) }
            cursor = last.sequence
        }
        lines.append(encoder.trailerLine())
        let verifier = AuditSegmentVerifier(name: "segment")
        for line in lines { verifier.consume(line.dropLast()) }
        verifier.finish()
        try expect(verifier.isIntact, "the segment verifies: \(verifier.failure ?? "")")
        let checkpoint = encoder.checkpoint(of: plan, archivedAt: Timestamp.unixMilliseconds(now))
        let event = AuditDraft(
            type: .auditArchived,
            at: now,
            detail: "\(plan.firstSequence)-\(plan.lastSequence)",
            actor: .cli
        )
        try await store.commitAuditArchive(plan, checkpoint: checkpoint, audit: [event])
        return (checkpoint, lines)
    }

    /// The store's chain from its checkpoint to its head.
    static func expectIntactFromCheckpoint(_ store: any EscrowStore, _ what: String) async throws {
        let checkpoint = try await store.auditCheckpoint()
        var verifier = AuditChain.Verifier(from: checkpoint?.head)
        var after = checkpoint?.sequence ?? 0
        while true {
            let page = try await store.auditEvents(after: after, limit: 50)
            guard let last = page.last else { break }
            for event in page { verifier.consume(event) }
            after = last.sequence
        }
        verifier.finish(head: try await store.auditHead())
        try expect(verifier.isIntact, "\(what): broken at \(String(describing: verifier.firstBrokenSequence))")
    }

    static func archiveCutIsAPrefix(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let t0 = fixture.start
        try expect(try await store.auditCheckpoints().isEmpty, "no checkpoint before the first cut")
        try expect(try await store.planAuditArchive(before: t0).isEmpty, "an empty store has nothing to archive")
        // 0 and 1 captured and purged; 2 captured and kept (live); 3 captured and purged after 2's capture.
        let records = try (0..<4).map { try fixture.record(user: $0, at: t0.addingTimeInterval(Double($0) * 10)) }
        for record in records.prefix(2) {
            _ = try await store.capture(record, actor: .library)
            try await purge(record, at: record.createdAt.addingTimeInterval(1), in: store)
        }
        let beforeLive = try await store.auditHead()?.sequence ?? 0
        for record in records.suffix(2) { _ = try await store.capture(record, actor: .library) }
        try await purge(records[3], at: t0.addingTimeInterval(40), in: store)
        let all = try await fixture.allEvents(store)
        try await fixture.expectIntactChain(all, of: store, "the chain before any cut")

        // A time limit: only the events before user 1's capture (at t0 + 10 s).
        let early = try await store.planAuditArchive(before: t0.addingTimeInterval(5))
        let firstOfUser1 = try await store.auditEvents(escrowID: records[1].id.hex, limit: 1).first?.sequence ?? 0
        try expect(early.limit == .time && early.lastSequence == firstOfUser1 - 1, "cut by time: \(early)")
        // Far in the future: stops before user 2's first event (a live escrow), whatever comes after it.
        let plan = try await store.planAuditArchive(before: t0.addingTimeInterval(86_400))
        try expect(plan.limit == .liveEscrow, "stopped by the live escrow: \(plan.limit)")
        try expect(plan.firstSequence == 1 && plan.lastSequence == beforeLive, "cut 1-\(beforeLive): \(plan)")
        let (checkpoint, _) = try await cut(plan, of: store, at: t0.addingTimeInterval(100))
        try expect(try await store.auditCheckpoints() == [checkpoint], "the checkpoint is recorded")
        let left = try await fixture.allEvents(store)
        try expect(
            left.first?.sequence == beforeLive + 1,
            "the store starts after the checkpoint: \(left.first?.sequence ?? 0)"
        )
        try expect(left.last?.draft.type == .auditArchived, "the cut is itself an event of the chain")
        try expect(
            try await store.auditEvents(escrowID: records[2].id.hex, limit: 10).count == 1,
            "the live escrow's capture is still in the store"
        )
        try expect(
            try await store.auditEvents(escrowID: records[0].id.hex, limit: 10).isEmpty,
            "a purged escrow's events before the cut are gone"
        )
        try await expectIntactFromCheckpoint(store, "the store's chain verifies from the checkpoint")
        var fromGenesis = AuditChain.Verifier()
        for event in left { fromGenesis.consume(event) }
        try expect(!fromGenesis.isIntact, "from the genesis the cut store does not verify: the checkpoint is needed")
        // Appends after the cut continue the chain.
        _ = try await store.capture(try fixture.record(user: 9, at: t0.addingTimeInterval(200)), actor: .library)
        try await expectIntactFromCheckpoint(store, "appends after the cut")
        try expect(
            try await store.planAuditArchive(before: t0.addingTimeInterval(86_400)).isEmpty,
            "nothing more to archive while user 2 is live"
        )
    }

    static func archiveCutsChain(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let t0 = fixture.start
        let records = try (0..<3).map { try fixture.record(user: $0, at: t0.addingTimeInterval(Double($0))) }
        for record in records { _ = try await store.capture(record, actor: .library) }
        try await purge(records[0], at: t0.addingTimeInterval(10), in: store)
        let first = try await store.planAuditArchive(before: t0.addingTimeInterval(3600))
        let (checkpoint, _) = try await cut(first, of: store, at: t0.addingTimeInterval(20))
        // A plan made before that cut is stale: refused, nothing deleted.
        let headBefore = try await store.auditHead()
        do {
            _ = try await cut(first, of: store, at: t0.addingTimeInterval(21))
            throw ConformanceFailure("a stale plan was committed")
        } catch is EscrowStoreError {}
        try expect(try await store.auditHead() == headBefore, "a refused cut appends nothing")
        try expect(try await store.auditCheckpoints().count == 1, "a refused cut records nothing")
        for record in records.dropFirst() { try await purge(record, at: t0.addingTimeInterval(30), in: store) }
        let second = try await store.planAuditArchive(before: t0.addingTimeInterval(3600))
        try expect(second.previous == checkpoint, "the second cut continues from the first checkpoint")
        try expect(second.previousHash == checkpoint.hash && second.firstSequence == checkpoint.sequence + 1, "chained")
        let (last, lines) = try await cut(second, of: store, at: t0.addingTimeInterval(40))
        try expect(lines.count == Int(last.eventCount) + 2, "header, events, trailer")
        try expect(
            try await store.auditCheckpoints().map(\.sequence) == [checkpoint.sequence, last.sequence],
            "two cuts"
        )
        try await expectIntactFromCheckpoint(store, "after two cuts")
    }

    /// Captures of new users run while a cut is planned, written and committed: none of a live escrow's events is
    /// archived, and the chain verifies from the checkpoint.
    static func archiveDuringCaptures(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let t0 = fixture.start
        let old = try (0..<20).map { try fixture.record(user: $0, at: t0) }
        for record in old {
            _ = try await store.capture(record, actor: .library)
            try await purge(record, at: t0.addingTimeInterval(1), in: store)
        }
        let fresh = try (100..<200).map { try fixture.record(user: $0, at: t0.addingTimeInterval(5)) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for record in fresh {
                group.addTask { _ = try await store.capture(record, actor: .library) }
            }
            group.addTask {
                let plan = try await store.planAuditArchive(before: t0.addingTimeInterval(3600))
                if !plan.isEmpty { try await cut(plan, of: store, at: t0.addingTimeInterval(10)) }
            }
            try await group.waitForAll()
        }
        try expect(try await store.auditCheckpoint() != nil, "the cut took the purged escrows' events")
        for record in fresh {
            let events = try await store.auditEvents(escrowID: record.id.hex, limit: 5)
            try expect(events.map(\.draft.type) == [.captured], "a live escrow's capture stays in the store")
        }
        try await expectIntactFromCheckpoint(store, "captures and a cut at once")
    }
}
