import EscrowCore
import EscrowCrypto
import Foundation

/// The operator's queries: the filtered keyset list, operator reasons in the chain, audit counts.
extension StoreConformance {
    static let adminChecks: [Check] = [
        Check(name: "admin list filters and keyset pages", escrows: adminListFiltersAndPages),
        Check(name: "operator reasons are stored and chained", escrows: operatorReasonsAreChained),
        Check(name: "audit counts by type and detail", escrows: auditCountsByTypeAndDetail),
    ]

    static func adminListFiltersAndPages(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let lifecycle = EscrowLifecycle()
        var records: [EscrowRecord] = []
        // Ten escrows a second apart; two share a creation time (the id breaks the tie).
        for number in 0..<10 {
            let at = fixture.start.addingTimeInterval(Double(number == 5 ? 4 : number))
            let record = try fixture.record(user: number, at: at)
            records.append(record)
            _ = try await store.capture(record, actor: .library)
        }
        // 2 and 7 die as tampered (ciphertext_invalid); 8 is rejected by the backend (backend_rejected).
        for number in [2, 7] {
            let action = lifecycle.handle(.tampered, on: records[number], at: fixture.start, actor: .library)
            guard case .update(let dead, _) = action.change else { throw ConformanceFailure("a tampered escrow dies") }
            try expect(
                try await store.commit(action, id: dead.id, expectedRevision: records[number].revision),
                "escrow \(number) dies"
            )
        }
        let later = records[8].createdAt
        let lease = lifecycle.handle(.lease(owner: "w1", duration: 60), on: records[8], at: later, actor: .library)
        guard case .update(let leased, _) = lease.change else { throw ConformanceFailure("a pending escrow leases") }
        _ = try await store.commit(lease, id: leased.id, expectedRevision: records[8].revision)
        let rejected = lifecycle.handle(
            .delivered(.rejected(status: 410), fencingToken: leased.revision, unitRandom: 0.5),
            on: leased,
            at: later,
            actor: .library
        )
        _ = try await store.commit(rejected, id: leased.id, expectedRevision: leased.revision)

        func walk(_ filter: EscrowFilter, pageSize: Int) async throws -> [EscrowRecord] {
            var seen: [EscrowRecord] = []
            var position: EscrowListPosition?
            for _ in 0..<100 {
                let page = try await store.list(filter, after: position, limit: pageSize)
                try expect(page.count <= pageSize, "a page holds at most its limit")
                guard let last = page.last else { return seen }
                seen += page
                position = EscrowListPosition(after: last)
            }
            throw ConformanceFailure("the walk did not end")
        }
        let ordered = records.sorted {
            ($0.createdAt, $0.id.hex) < ($1.createdAt, $1.id.hex)
        }.map(\.id)
        for size in [1, 3, 10, 50] {
            let all = try await walk(EscrowFilter(), pageSize: size)
            try expect(all.map(\.id) == ordered, "pages of \(size) visit every escrow once, by (created, id)")
        }
        let dead = try await walk(EscrowFilter(state: .dead), pageSize: 2)
        try expect(Set(dead.map(\.id)) == Set([2, 7, 8].map { records[$0].id }), "state dead: 2, 7, 8")
        let tampered = try await walk(EscrowFilter(deadCode: .ciphertextInvalid), pageSize: 1)
        try expect(Set(tampered.map(\.id)) == Set([2, 7].map { records[$0].id }), "a dead code alone: 2 and 7")
        let rejectedOnes = try await walk(EscrowFilter(state: .dead, deadCode: .rejected), pageSize: 5)
        try expect(rejectedOnes.map(\.id) == [records[8].id], "dead with backend_rejected: 8")
        let attempted = try await walk(EscrowFilter(minimumAttempts: 1), pageSize: 5)
        try expect(attempted.map(\.id) == [records[8].id], "at least one attempt: 8")
        let old = try await walk(EscrowFilter(createdAtOrBefore: fixture.start.addingTimeInterval(2)), pageSize: 2)
        try expect(old.map(\.id) == ordered.prefix(3).map { $0 }, "created at or before start+2 s: the first three")
        let versionOne = try await walk(EscrowFilter(keyVersion: 1), pageSize: 4)
        let versionTwo = try await walk(EscrowFilter(keyVersion: 2), pageSize: 4)
        try expect(versionOne.count == 10 && versionTwo.isEmpty, "key version filter")
        let pendingOld = try await walk(
            EscrowFilter(state: .pending, createdAtOrBefore: fixture.start.addingTimeInterval(3)),
            pageSize: 1
        )
        try expect(
            Set(pendingOld.map(\.id)) == Set([0, 1, 3].map { records[$0].id }),
            "filters combine: pending and old enough"
        )
    }

    static func operatorReasonsAreChained(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let lifecycle = EscrowLifecycle()
        let record = try fixture.record(user: 1)
        _ = try await store.capture(record, actor: .library)
        let tampered = lifecycle.handle(.tampered, on: record, at: fixture.start, actor: .library)
        guard case .update(let dead, _) = tampered.change else { throw ConformanceFailure("a tampered escrow dies") }
        _ = try await store.commit(tampered, id: dead.id, expectedRevision: record.revision)
        let reason = try OperatorReason("backend fixed, ticket OPS-42 — ünïcode ok").unwrap("a valid reason")
        let requeue = lifecycle.handle(.requeue, on: dead, at: fixture.start, actor: .console(token: "ops"))
            .withReason(reason)
        guard case .update(let pending, _) = requeue.change else { throw ConformanceFailure("a dead escrow requeues") }
        try expect(try await store.commit(requeue, id: dead.id, expectedRevision: dead.revision), "the requeue applies")
        let erase = lifecycle.handle(.purge(.erased), on: pending, at: fixture.start, actor: .http(token: "ops"))
            .withReason(try OperatorReason("user asked").unwrap("a valid reason"))
        try expect(
            try await store.commit(erase, id: pending.id, expectedRevision: pending.revision),
            "the erase applies"
        )
        let events = try await store.auditEvents(escrowID: record.id.hex, limit: 100)
        try expect(
            events.map(\.draft.reason) == [nil, nil, reason.text, "user asked"],
            "reasons read back on their events: \(events.map(\.draft.reason))"
        )
        try expect(events[2].draft.actor.rawValue == "console:ops", "the console actor is kept")
        try expect(events.allSatisfy { $0.encoding == .current }, "new events use the current encoding")
        try await fixture.expectIntactChain(try await fixture.allEvents(store), of: store, "the chain with reasons")
        try expect(OperatorReason("two\nlines") == nil, "a reason with a line break is refused")
        try expect(OperatorReason("   ") == nil, "an empty reason is refused")
        try expect(OperatorReason(String(repeating: "x", count: 201)) == nil, "a reason over 200 characters is refused")
    }

    static func auditCountsByTypeAndDetail(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let lifecycle = EscrowLifecycle()
        for number in 0..<3 {
            let record = try fixture.record(user: number, at: fixture.start.addingTimeInterval(Double(number) * 3600))
            _ = try await store.capture(record, actor: .library)
            if number > 0 {
                let purge = lifecycle.handle(
                    .purge(number == 1 ? .erased : .expired),
                    on: record,
                    at: record.createdAt,
                    actor: .library
                )
                _ = try await store.commit(purge, id: record.id, expectedRevision: record.revision)
            }
        }
        // A confirmed delivery: one `purged` (confirmed) with the delivery's status, counted apart.
        let delivered = try fixture.record(user: 3, at: fixture.start.addingTimeInterval(3 * 3600))
        _ = try await store.capture(delivered, actor: .library)
        let claimed = try await store.claimDue(at: delivered.createdAt, limit: 10, owner: "w1", leaseDuration: 60)
        let leased = try claimed.first { $0.id == delivered.id }.unwrap("the delivered escrow, claimed")
        let confirmed = lifecycle.handle(
            .delivered(.confirmed(status: 204), fencingToken: leased.revision, unitRandom: 0.5),
            on: leased,
            at: delivered.createdAt,
            actor: .worker("w1")
        )
        try expect(
            try await store.commit(confirmed, id: leased.id, expectedRevision: leased.revision),
            "the confirmed delivery commits"
        )
        let counts = Set(try await store.auditCounts(since: fixture.start.addingTimeInterval(1800)))
        try expect(
            counts == [
                AuditCount(type: .captured, detail: nil, count: 3),
                AuditCount(type: .purged, detail: "erased", count: 1),
                AuditCount(type: .purged, detail: "expired", count: 1),
                AuditCount(type: .purged, detail: "confirmed", count: 1, withStatus: true),
            ],
            "counts since start+30 min: \(counts)"
        )
        try expect(try await store.lastAuditEvent(of: AuditCount.keyTypes) == nil, "no key event yet")
        let at = fixture.start.addingTimeInterval(9000)
        try await store.appendAudit([AuditDraft(type: .keysRotated, at: at, detail: "2", actor: .cli)])
        try expect(try await store.lastAuditEvent(of: AuditCount.keyTypes) == at, "the last key event's time")
    }
}

extension Optional {
    func unwrap(_ what: String) throws -> Wrapped {
        guard let self else { throw ConformanceFailure("expected \(what)") }
        return self
    }
}
