import EscrowCore
import EscrowCrypto
import Foundation

extension StoreConformance {
    static func captureReadsBack(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let record = try fixture.record(user: 1)
        let outcome = try await store.capture(record, actor: .library)
        try expect(outcome == .created(record), "a first capture is .created with the record")
        try expect(try await store.record(id: record.id) == record, "record(id:) returns the stored record unchanged")
        try expect(
            try await store.record(blindIndex: record.blindIndex) == record,
            "record(blindIndex:) finds the live record"
        )
        try expect(try await store.record(id: .random()) == nil, "an unknown id is nil")
        let events = try await fixture.allEvents(store)
        try expect(events.map(\.draft.type) == [.captured], "one captured event, got \(events.map(\.draft.type))")
        try expect(events[0].draft.escrowID == record.id.hex, "the event names the escrow id")
        try expect(events[0].draft.indexPrefix == record.blindIndex.prefixHex, "the event has the index prefix")
    }

    static func sameContentUnchanged(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let first = try fixture.record(user: 1, content: "a")
        _ = try await store.capture(first, actor: .library)
        var again = try fixture.record(user: 1, content: "a")
        again.contentTag = first.contentTag
        let outcome = try await store.capture(again, actor: .library)
        try expect(outcome == .unchanged(first), "same content tag → .unchanged with the first record")
        try expect(try await store.record(id: again.id) == nil, "the duplicate was not stored")
        try expect(try await fixture.allEvents(store).count == 1, "no audit event for an unchanged capture")
    }

    static func newContentReplaces(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let first = try fixture.record(user: 1, content: "a")
        let second = try fixture.record(user: 1, content: "b", at: fixture.start.addingTimeInterval(5))
        _ = try await store.capture(first, actor: .library)
        let outcome = try await store.capture(second, actor: .cli)
        try expect(outcome == .replaced(second, previous: first.id), "new content → .replaced")
        try expect(try await store.record(id: first.id) == nil, "the replaced escrow is gone")
        try expect(try await store.record(blindIndex: second.blindIndex) == second, "the new escrow is live")
        let types = try await fixture.allEvents(store).map(\.draft.type)
        try expect(types == [.captured, .replaced, .purged, .captured], "events: \(types)")
        let purged = try await fixture.allEvents(store)[2].draft
        try expect(purged.detail == PurgeReason.replaced.rawValue, "purged as replaced")
        try expect(purged.ageMilliseconds == 5000, "age from capture to purge is recorded")
    }

    static func commitIsCompareAndSet(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let record = try fixture.record(user: 1)
        _ = try await store.capture(record, actor: .library)
        let lifecycle = EscrowLifecycle()
        let lease = lifecycle.handle(.lease(owner: "w1", duration: 30), on: record, at: fixture.start, actor: .library)
        guard case .update(let next, _) = lease.change else { throw ConformanceFailure("a due escrow is leased") }
        try expect(
            !(try await store.commit(lease, id: record.id, expectedRevision: record.revision + 5)),
            "a stale revision does not apply"
        )
        try expect(try await store.record(id: record.id) == record, "a refused commit changes nothing")
        try expect(
            try await store.commit(lease, id: record.id, expectedRevision: record.revision),
            "the current revision applies"
        )
        try expect(try await store.record(id: record.id) == next, "the update is stored")
        try expect(
            !(try await store.commit(lease, id: record.id, expectedRevision: record.revision)),
            "the old revision no longer applies (fencing)"
        )
        let ignored = lifecycle.handle(.requeue, on: next, at: fixture.start, actor: .cli)
        try expect(
            !(try await store.commit(ignored, id: record.id, expectedRevision: next.revision)),
            ".ignore changes nothing"
        )
    }

    static func purgeDeletesAndAudits(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let record = try fixture.record(user: 1)
        _ = try await store.capture(record, actor: .library)
        let action = EscrowLifecycle().handle(
            .confirm,
            on: record,
            at: fixture.start.addingTimeInterval(2),
            actor: .cli
        )
        try expect(try await store.commit(action, id: record.id, expectedRevision: 99) == false, "stale purge refused")
        try expect(try await store.record(id: record.id) != nil, "still there after a refused purge")
        try expect(try await store.commit(action, id: record.id, expectedRevision: 1), "purge applies")
        try expect(try await store.record(id: record.id) == nil, "purged row is gone")
        try expect(try await store.record(blindIndex: record.blindIndex) == nil, "no live escrow for the user")
        let events = try await fixture.allEvents(store).map(\.draft)
        try expect(events.map(\.type) == [.captured, .purged], "events: \(events.map(\.type))")
        try expect(events[1].detail == "confirmed" && events[1].httpStatus == nil, "a confirm call: no status")
        try await store.flushPurged()
        try expect(
            try await store.commit(action, id: record.id, expectedRevision: 1) == false,
            "a second purge is a no-op"
        )
    }

    static func claimLeasesDueOnce(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let now = fixture.start
        let due = try fixture.record(user: 1, at: now)
        var later = try fixture.record(user: 2, at: now)
        later.nextAttemptAt = now.addingTimeInterval(60)
        _ = try await store.capture(due, actor: .library)
        _ = try await store.capture(later, actor: .library)
        let claimed = try await store.claimDue(at: now, limit: 10, owner: "w1", leaseDuration: 300)
        try expect(claimed.map(\.id) == [due.id], "only the due escrow is leased")
        try expect(claimed[0].state == .leased && claimed[0].leaseOwner == "w1", "leased to w1")
        try expect(claimed[0].leaseExpiresAt == now.addingTimeInterval(300), "the lease ends after its duration")
        try expect(claimed[0].revision == due.revision + 1, "the lease bumps the revision (fencing token)")
        try expect(claimed[0].attempts == 0, "a lease is not an attempt (a request sent is)")
        try expect(try await store.record(id: due.id) == claimed[0], "the lease is stored")
        let again = try await store.claimDue(at: now.addingTimeInterval(1), limit: 10, owner: "w2", leaseDuration: 30)
        try expect(again.isEmpty, "a leased escrow is not leased again before its lease ends")
        let afterLater = try await store.claimDue(
            at: now.addingTimeInterval(61),
            limit: 10,
            owner: "w2",
            leaseDuration: 30
        )
        try expect(afterLater.map(\.id) == [later.id], "the later escrow becomes due")
    }

    static func claimsOnlyTheKeyVersionsAsked(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let now = fixture.start
        let old = try fixture.record(user: 1, at: now)
        var rotated = try fixture.record(user: 2, at: now)
        rotated.sealed.keyVersion = 2  // as a rewrap to version 2 leaves it (the MAC is not checked by stores)
        _ = try await store.capture(old, actor: .library)
        _ = try await store.capture(rotated, actor: .library)
        let none = try await store.claimDue(at: now, limit: 10, owner: "w1", leaseDuration: 60, keyVersions: [])
        try expect(none.isEmpty, "a worker that can open no version claims nothing")
        let onlyTwo = try await store.claimDue(at: now, limit: 10, owner: "w1", leaseDuration: 60, keyVersions: [2, 9])
        try expect(onlyTwo.map(\.id) == [rotated.id], "only escrows sealed to an openable version are claimed")
        let untouched = try await store.record(id: old.id)
        try expect(untouched == old, "an escrow the worker cannot open is left as it was: no lease, no attempt")
        let any = try await store.claimDue(at: now, limit: 10, owner: "w2", leaseDuration: 60)
        try expect(any.map(\.id) == [old.id], "without a filter the rest is claimed")
    }

    static func expiredLeasesComeBack(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let now = fixture.start
        let record = try fixture.record(user: 1, at: now)
        _ = try await store.capture(record, actor: .library)
        let first = try await store.claimDue(at: now, limit: 1, owner: "w1", leaseDuration: 10)
        try expect(first.count == 1, "claimed")
        let second = try await store.claimDue(at: now.addingTimeInterval(11), limit: 1, owner: "w2", leaseDuration: 10)
        try expect(second.count == 1 && second[0].leaseOwner == "w2", "an expired lease is taken over")
        try expect(second[0].revision > first[0].revision, "the takeover has a newer fencing token")
        let stale = EscrowLifecycle().handle(
            .delivered(.confirmed(status: 200), fencingToken: first[0].revision, unitRandom: 0.5),
            on: second[0],
            at: now.addingTimeInterval(12),
            actor: .worker("w1")
        )
        try expect(stale.change == .ignore(.staleLease), "the lifecycle refuses a stale token")
        let forced = EscrowLifecycle().handle(
            .delivered(.confirmed(status: 200), fencingToken: second[0].revision, unitRandom: 0.5),
            on: second[0],
            at: now.addingTimeInterval(12),
            actor: .worker("w2")
        )
        try expect(
            !(try await store.commit(forced, id: record.id, expectedRevision: first[0].revision)),
            "the store refuses a commit at the stale worker's revision"
        )
        let accepted = EscrowLifecycle(confirmTimeout: 100).handle(
            .delivered(.accepted(status: 202), fencingToken: second[0].revision, unitRandom: 0.5),
            on: second[0],
            at: now.addingTimeInterval(12),
            actor: .worker("w2")
        )
        try expect(try await store.commit(accepted, id: record.id, expectedRevision: second[0].revision), "202 stored")
        let early = try await store.claimDue(at: now.addingTimeInterval(50), limit: 1, owner: "w3", leaseDuration: 10)
        try expect(early.isEmpty, "awaiting confirmation is not due before its deadline")
        let late = try await store.claimDue(at: now.addingTimeInterval(113), limit: 1, owner: "w3", leaseDuration: 10)
        try expect(late.count == 1, "a missed confirmation deadline makes it due again")
    }

    static func concurrentClaimsAreExclusive(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let count = 60
        for number in 0..<count {
            _ = try await store.capture(try fixture.record(user: number), actor: .library)
        }
        let now = fixture.start
        let claims = try await withThrowingTaskGroup(of: [EscrowID].self) { group in
            for worker in 0..<6 {
                group.addTask {
                    var mine: [EscrowID] = []
                    while true {
                        let batch = try await store.claimDue(at: now, limit: 3, owner: "w\(worker)", leaseDuration: 60)
                        if batch.isEmpty { return mine }
                        mine += batch.map(\.id)
                    }
                }
            }
            return try await group.reduce(into: [EscrowID]()) { $0 += $1 }
        }
        try expect(claims.count == count, "every escrow leased exactly once: \(claims.count) leases for \(count)")
        try expect(Set(claims).count == count, "no escrow leased twice")
    }

    static func queriesAndPagination(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        var records: [EscrowRecord] = []
        for number in 0..<9 {
            let record = try fixture.record(user: number, retention: number < 4 ? 10 : 1000)
            records.append(record)
            _ = try await store.capture(record, actor: .library)
        }
        var seen: [EscrowID] = []
        while true {
            let page = try await store.records(.all, after: seen.last, limit: 2)
            if page.isEmpty { break }
            seen += page.map(\.id)
        }
        try expect(Set(seen) == Set(records.map(\.id)) && seen.count == 9, "pagination visits each record once")
        let expired = try await store.records(
            .expired(at: fixture.start.addingTimeInterval(10)),
            after: nil,
            limit: 100
        )
        try expect(Set(expired.map(\.id)) == Set(records.prefix(4).map(\.id)), "expired = retention passed")
        let tampered = EscrowLifecycle().handle(.tampered, on: records[5], at: fixture.start, actor: .library)
        guard case .update(let dead, _) = tampered.change else { throw ConformanceFailure("a tampered escrow dies") }
        _ = try await store.commit(tampered, id: dead.id, expectedRevision: records[5].revision)
        let deadOnes = try await store.records(.state(.dead), after: nil, limit: 100)
        try expect(deadOnes == [dead], "state query finds the dead one")
        let versions = try await store.keyVersionsInUse()
        try expect(versions == [1: 9], "all nine on key version 1: \(versions)")
        let other = try await store.records(.keyVersionOtherThan(1), after: nil, limit: 100)
        try expect(other.isEmpty, "none on another version")
    }

    static func auditChainVerifies(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        for number in 0..<5 {
            let record = try fixture.record(user: number)
            _ = try await store.capture(record, actor: .library)
            if number % 2 == 0 {
                let action = EscrowLifecycle().handle(.purge(.erased), on: record, at: fixture.start, actor: .cli)
                _ = try await store.commit(action, id: record.id, expectedRevision: record.revision)
            }
        }
        try await store.appendAudit([AuditDraft(type: .keysRotated, at: fixture.start, detail: "v2", actor: .cli)])
        let events = try await fixture.allEvents(store)
        try expect(events.map(\.sequence) == Array(1...Int64(events.count)), "sequences are 1...n without gaps")
        try await fixture.expectIntactChain(events, of: store, "the stored chain verifies")
        try expect(try await store.auditHead()?.sequence == Int64(events.count), "the head names the last event")
        var tallies: [AuditTally] = []
        while true {
            let page = try await store.auditTallies(after: tallies.last?.sequence ?? 0, limit: 2)
            if page.isEmpty { break }
            tallies += page
        }
        try expect(
            tallies == events.compactMap(AuditTally.init),
            "the report's tallies are the captures and purges of the chain, in order"
        )
        try expect(tallies.count == 8, "5 captures, 3 purges: \(tallies.count)")
    }

    static func summaryCounts(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let old = try fixture.record(user: 1, at: fixture.start, retention: 10)
        let young = try fixture.record(user: 2, at: fixture.start.addingTimeInterval(5), retention: 1000)
        _ = try await store.capture(old, actor: .library)
        _ = try await store.capture(young, actor: .library)
        let tampered = EscrowLifecycle().handle(.tampered, on: young, at: fixture.start, actor: .library)
        _ = try await store.commit(tampered, id: young.id, expectedRevision: young.revision)
        let summary = try await store.summary(at: fixture.start.addingTimeInterval(20))
        try expect(summary.live[.pending] == 1 && summary.live[.dead] == 1, "by state: \(summary.live)")
        try expect(summary.live[.leased] == 0 && summary.live[.awaitingConfirmation] == 0, "zeros are present")
        try expect(summary.overdue == 1, "one past retention")
        try expect(summary.oldestLiveCreatedAt == fixture.start, "oldest live")
        try expect(summary.dead == [DeadEscrow(id: young.id, code: .ciphertextInvalid)], "dead list with code")
    }

    static func concurrentCaptures(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        // 300 users captured concurrently, plus 20 rival captures of user 0 with different content.
        let records = try (0..<300).map { try fixture.record(user: $0) }
        let rivals = try (0..<20).map { try fixture.record(user: 0, content: "rival \($0)") }
        let outcomes = try await withThrowingTaskGroup(of: CaptureOutcome.self) { group in
            for record in records + rivals {
                group.addTask { try await store.capture(record, actor: .library) }
            }
            return try await group.reduce(into: [CaptureOutcome]()) { $0.append($1) }
        }
        try expect(outcomes.count == 320, "every capture answered")
        for record in records.dropFirst() {
            try expect(try await store.record(id: record.id) == record, "a concurrent capture is stored exactly")
        }
        let replaced = outcomes.filter { if case .replaced = $0 { true } else { false } }.count
        try expect(replaced == 20, "20 of the 21 captures of user 0 replaced another: \(replaced)")
        let live = try await store.summary(at: fixture.start).live[.pending]
        try expect(live == 300, "one live escrow per user: \(String(describing: live))")
        let events = try await fixture.allEvents(store)
        try expect(events.count == 320 + 20 * 2, "captured ×320, replaced+purged ×20: \(events.count)")
        try await fixture.expectIntactChain(events, of: store, "the chain written by batched captures verifies")
    }

    /// Concurrent delivery outcomes (a worker's batch) may share a transaction, but each is still its own
    /// compare-and-set: stale ones change nothing, the others commit, and the chain stays whole.
    static func concurrentCommitsAreEachCompareAndSet(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let now = fixture.start
        let leased = try await fixture.capturedAndLeased(40, in: store)
        let lifecycle = EscrowLifecycle()
        let results = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
            for (index, record) in leased.enumerated() {
                group.addTask {
                    let outcome: DeliveryOutcome =
                        index % 2 == 0 ? .confirmed(status: 200) : .retry(status: 503, retryAfter: 5)
                    let action = lifecycle.handle(
                        .delivered(outcome, fencingToken: record.revision, unitRandom: 0.5),
                        on: record,
                        at: now.addingTimeInterval(1),
                        actor: .worker("w1")
                    )
                    // Every fourth with a stale token, as a worker that lost its lease.
                    let expected = index % 4 == 3 ? record.revision - 1 : record.revision
                    return (index, try await store.commit(action, id: record.id, expectedRevision: expected))
                }
            }
            return try await group.reduce(into: [Int: Bool]()) { $0[$1.0] = $1.1 }
        }
        for (index, record) in leased.enumerated() {
            let stored = try await store.record(id: record.id)
            if index % 4 == 3 {
                try expect(results[index] == false && stored == record, "a stale outcome changes nothing")
            } else if index % 2 == 0 {
                try expect(results[index] == true && stored == nil, "a confirmation purges")
            } else {
                try expect(results[index] == true && stored?.state == .pending && stored?.attempts == 1, "a retry")
            }
        }
        let events = try await fixture.allEvents(store)
        // 40 captures; 20 confirmations × 3 events; 10 retries × 1 event.
        // 40 captures, one `purged` per confirmation (20), one `delivery-attempted` per retry (10).
        try expect(events.count == 40 + 20 + 10, "one event per outcome: \(events.count)")
        try await fixture.expectIntactChain(events, of: store, "the chain written by batched outcomes verifies")
    }

    /// The same purge submitted several times at once (a worker's confirmed delivery and confirm calls racing, so
    /// that they share a batch): exactly one applies, with one set of audit events; one with a stale revision never.
    static func concurrentPurgesOfOneEscrowApplyOnce(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let now = fixture.start
        let leased = try await fixture.capturedAndLeased(20, in: store)
        let lifecycle = EscrowLifecycle()
        let results = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
            for (index, record) in leased.enumerated() {
                let action = lifecycle.handle(
                    .delivered(.confirmed(status: 200), fencingToken: record.revision, unitRandom: 0.5),
                    on: record,
                    at: now.addingTimeInterval(1),
                    actor: .worker("w1")
                )
                for attempt in 0..<4 {
                    // Three times with the lease's revision, once with a stale one.
                    let expected = attempt == 3 ? record.revision - 1 : record.revision
                    group.addTask {
                        (index, try await store.commit(action, id: record.id, expectedRevision: expected))
                    }
                }
            }
            return try await group.reduce(into: [Int: Int]()) { counts, result in
                counts[result.0, default: 0] += result.1 ? 1 : 0
            }
        }
        for (index, record) in leased.enumerated() {
            try expect(results[index] == 1, "escrow \(index): applied \(results[index] ?? 0) times, not once")
            try expect(try await store.record(id: record.id) == nil, "escrow \(index) purged")
        }
        let events = try await fixture.allEvents(store)
        let purges = events.filter { $0.draft.type == .purged }
        try expect(purges.count == 20, "one purge event per escrow: \(purges.count)")
        try expect(Set(purges.compactMap(\.draft.escrowID)).count == 20, "no escrow purged twice")
        try expect(events.count == 20 + 20, "captures and one event per purge: \(events.count)")
        try await fixture.expectIntactChain(events, of: store, "the chain verifies")
    }
}
