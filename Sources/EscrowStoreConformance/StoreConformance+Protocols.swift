import EscrowCore
import EscrowCrypto
import Foundation

/// The checks beyond capture, claim and commit: key retirement, per-escrow history, malformed rows, the Apple
/// notification log and the bearer tokens.
extension StoreConformance {
    static func perEscrowAuditHistory(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let first = try fixture.record(user: 1)
        let second = try fixture.record(user: 2)
        _ = try await store.capture(first, actor: .library)
        _ = try await store.capture(second, actor: .library)
        let erase = EscrowLifecycle().handle(.purge(.erased), on: first, at: fixture.start, actor: .cli)
        try expect(try await store.commit(erase, id: first.id, expectedRevision: first.revision), "erased")
        let history = try await store.auditEvents(escrowID: first.id.hex, limit: 10)
        try expect(history.map(\.draft.type) == [.captured, .purged], "one escrow's events, oldest first: \(history)")
        try expect(history.allSatisfy { $0.draft.escrowID == first.id.hex }, "only that escrow's")
        try expect(history.map(\.sequence) == history.map(\.sequence).sorted(), "in chain order")
        let limited = try await store.auditEvents(escrowID: first.id.hex, limit: 1)
        try expect(limited.map(\.draft.type) == [.captured], "at most `limit`, the oldest")
        let other = try await store.auditEvents(escrowID: second.id.hex, limit: 10)
        try expect(other.map(\.draft.type) == [.captured], "the other escrow's own history")
        try expect(try await store.auditEvents(escrowID: "00", limit: 10).isEmpty, "an unknown id has none")
    }

    static func keyRetirement(_ make: MakeStore) async throws {
        let store = try await make()
        let fixture = Fixture()
        let rotated = try fixture.keyring.rotated(now: fixture.start)
        let old = try fixture.record(user: 1)
        let new = try fixture.record(user: 2, keyring: rotated)
        _ = try await store.capture(old, actor: .library)
        _ = try await store.capture(new, actor: .library)
        try expect(try await store.keyVersionsInUse() == [1: 1, 2: 1], "one escrow on each version")
        let foreign = try await store.records(.dueSealedToNoneOf([1], at: fixture.start), after: nil, limit: 10)
        try expect(foreign.map(\.id) == [new.id], "due and sealed to a version other than 1: \(foreign.count)")
        let early = fixture.start.addingTimeInterval(-1)
        try expect(
            try await store.records(.dueSealedToNoneOf([1], at: early), after: nil, limit: 10).isEmpty,
            "nothing is due before its capture"
        )
        let retire = { (version: UInt32) in
            try await store.retireKeyVersion(
                version,
                audit: [AuditDraft(type: .keysRetired, at: fixture.start, detail: "version \(version)", actor: .cli)]
            )
        }
        do {
            try await retire(1)
            throw ConformanceFailure("a version still in use was retired")
        } catch let error as EscrowStoreError {
            try expect(error.code == .keyVersionInUse, "refused as in use: \(error.code)")
        }
        try expect(try await store.retiredKeyVersions().isEmpty, "nothing retired by a refusal")
        let purge = EscrowLifecycle().handle(.purge(.confirmed), on: old, at: fixture.start, actor: .cli)
        try expect(try await store.commit(purge, id: old.id, expectedRevision: old.revision), "purged")
        try await retire(1)
        try await retire(1)
        try expect(try await store.retiredKeyVersions() == [1], "version 1 retired")
        let retiredEvents = try await fixture.allEvents(store).filter { $0.draft.type == .keysRetired }
        try expect(retiredEvents.count == 1, "retiring twice records it once: \(retiredEvents.count)")
        do {
            _ = try await store.capture(try fixture.record(user: 3), actor: .library)
            throw ConformanceFailure("a capture sealed to a retired version was stored")
        } catch let error as EscrowStoreError {
            try expect(error.code == .keyVersionRetired, "refused as retired: \(error.code)")
        }
        try expect(try await store.record(blindIndex: try fixture.record(user: 3).blindIndex) == nil, "nothing stored")
        _ = try await store.capture(try fixture.record(user: 4, keyring: rotated), actor: .library)
        try expect(try await store.keyVersionsInUse() == [2: 2], "the active version still captures")
    }

    /// What the read paths (`GET /v1/escrows/{user}`, `…/replay`, `status`) do with the user's malformed row, for every
    /// kind of damage: read as `malformed_row`, found by its blind index, quarantined once (one dead event naming what
    /// its id column holds), still found as quarantined, and deleted by an erasure.
    static func malformedRowsMetByReads(_ make: MakeSubject) async throws {
        let subject = try await make()
        let store = subject.escrows
        let fixture = Fixture()
        let lifecycle = EscrowLifecycle()
        let damages = RowDamage.allCases
        let records = try damages.indices.map { try fixture.record(user: $0) }
        for record in records { _ = try await store.capture(record, actor: .library) }
        for (record, damage) in zip(records, damages) { try await subject.damage(record.id, damage) }
        for (number, (record, damage)) in zip(records, damages).enumerated() {
            do {
                _ = try await store.record(blindIndex: record.blindIndex)
                throw ConformanceFailure("\(damage): a malformed row was read as a record")
            } catch let error as EscrowStoreError {
                try expect(error.code == .malformedRow, "\(damage): read as malformed_row: \(error.code)")
            }
            let found = try unwrap(try await store.malformedRow(blindIndex: record.blindIndex))
            let column: String =
                switch damage {
                case .negativeAttempts: "attempts"
                case .truncatedID: "id"
                case .keyVersionOutOfRange: "key_version"
                }
            try expect(found.column == column && !found.isQuarantined, "\(damage): described: \(found)")
            // By its id too, when the id is intact (a truncated id matches no id).
            let byID = try await store.malformedRow(id: record.id)
            try expect(
                damage == .truncatedID ? byID == nil : byID?.rowID == found.rowID,
                "\(damage): found by its id as by its user"
            )
            let quarantine = lifecycle.handle(.quarantine, on: found, at: fixture.start, actor: .http(token: "reader"))
            try expect(try await store.commit(quarantine, on: found), "\(damage): quarantined")
            let quarantined = try unwrap(try await store.malformedRow(blindIndex: record.blindIndex))
            try expect(quarantined.isQuarantined, "\(damage): found quarantined")
            let again = lifecycle.handle(.quarantine, on: quarantined, at: fixture.start, actor: .http(token: "reader"))
            try expect(try await store.commit(again, on: quarantined), "\(damage): a second read applies again")
            let dead = try await fixture.allEvents(store).filter { $0.draft.type == .dead }
            try expect(dead.count == number + 1, "\(damage): one dead event, none for the second read: \(dead.count)")
            let named = damage == .truncatedID ? RowDamage.truncatedIDHex : record.id.hex
            try expect(
                dead.last?.draft.escrowID == named && dead.last?.draft.detail == DeadCode.ciphertextInvalid.rawValue,
                "\(damage): the event names the id column's bytes, as ciphertext_invalid"
            )
        }
        for record in records {
            let row = try unwrap(try await store.malformedRow(blindIndex: record.blindIndex))
            let erase = lifecycle.handle(.purge(.erased), on: row, at: fixture.start, actor: .cli)
            try expect(try await store.commit(erase, on: row), "erased")
            try expect(try await store.record(blindIndex: record.blindIndex) == nil, "gone once erased")
        }
        try await fixture.expectIntactChain(try await fixture.allEvents(store), of: store, "the chain verifies")
    }

    static func malformedRows(_ make: MakeSubject) async throws {
        let subject = try await make()
        let store = subject.escrows
        let fixture = Fixture()
        let lifecycle = EscrowLifecycle()
        let records = try (0..<3).map { try fixture.record(user: $0) }
        for record in records { _ = try await store.capture(record, actor: .library) }
        try await subject.damage(records[0].id, .negativeAttempts)
        try await subject.damage(records[1].id, .truncatedID)

        do {
            _ = try await store.record(blindIndex: records[0].blindIndex)
            throw ConformanceFailure("a malformed row was read as a record")
        } catch let error as EscrowStoreError {
            try expect(error.code == .malformedRow, "read as malformed_row: \(error.code)")
        }
        let found = try await store.malformedRow(blindIndex: records[0].blindIndex)
        try expect(
            found?.column == "attempts" && found?.escrowIDHex == records[0].id.hex,
            "described: \(String(describing: found))"
        )
        try expect(found?.isQuarantined == false, "not yet quarantined")
        try expect(
            try await store.malformedRow(blindIndex: records[2].blindIndex) == nil,
            "an intact row is not malformed"
        )

        // A claim quarantines both, alone, and leases the intact one.
        let leased = try await store.claimDue(at: fixture.start, limit: 3, owner: "w1", leaseDuration: 60)
        try expect(leased.map(\.id) == [records[2].id], "only the intact escrow is leased")
        let dead = try await fixture.allEvents(store).filter { $0.draft.type == .dead }
        try expect(
            Set(dead.map { $0.draft.escrowID ?? "" }) == [records[0].id.hex, RowDamage.truncatedIDHex],
            "one dead event each, naming what the id column holds: \(dead.map(\.draft.escrowID))"
        )
        try expect(dead.allSatisfy { $0.draft.detail == DeadCode.ciphertextInvalid.rawValue }, "as ciphertext_invalid")
        let summary = try await store.summary(at: fixture.start)
        try expect(
            Set(summary.dead.map(\.idHex)) == [records[0].id.hex, RowDamage.truncatedIDHex],
            "the summary lists every dead row: \(summary.dead)"
        )
        try expect(
            try await store.claimDue(at: fixture.start.addingTimeInterval(30), limit: 3, owner: "w2", leaseDuration: 60)
                .isEmpty,
            "nothing malformed is claimed again (the intact one is still leased)"
        )
        let quarantined = try await store.malformedRow(blindIndex: records[0].blindIndex)
        try expect(quarantined?.isQuarantined == true, "quarantined")
        let again = lifecycle.handle(.quarantine, on: try unwrap(quarantined), at: fixture.start, actor: .cli)
        try expect(try await store.commit(again, on: try unwrap(quarantined)), "a quarantine applies again")
        try expect(try await fixture.allEvents(store).filter { $0.draft.type == .dead }.count == 2, "without an event")

        // An erasure deletes it; retention deletes the other.
        let erase = lifecycle.handle(.purge(.erased), on: try unwrap(quarantined), at: fixture.start, actor: .cli)
        try expect(try await store.commit(erase, on: try unwrap(quarantined)), "erased")
        try expect(try await store.record(blindIndex: records[0].blindIndex) == nil, "gone")
        try expect(!(try await store.commit(erase, on: try unwrap(quarantined))), "a second erasure finds nothing")
        try expect(
            try await store.purgeMalformed(expiredAt: fixture.start, actor: .cli, lifecycle: lifecycle) == 0,
            "nothing expired yet"
        )
        let later = fixture.start.addingTimeInterval(7200)
        try expect(
            try await store.purgeMalformed(expiredAt: later, actor: .cli, lifecycle: lifecycle) == 1,
            "the other malformed row past retention"
        )
        try expect(try await store.malformedRow(blindIndex: records[1].blindIndex) == nil, "purged")
        let purged = try await fixture.allEvents(store).filter { $0.draft.type == .purged }
        try expect(purged.compactMap(\.draft.detail).sorted() == ["erased", "expired"], "purge events: \(purged)")
        try await fixture.expectIntactChain(try await fixture.allEvents(store), of: store, "the chain verifies")
    }

    static func notificationsRecordedOnce(_ make: MakeSubject) async throws {
        let log = try await make().outbox
        let first = Hashing.blake2b256(Array("fake-notification-1".utf8))
        let second = Hashing.blake2b256(Array("fake-notification-2".utf8))
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        try expect(!(try await log.hasNotification(idHash: first)), "unknown at first")
        try expect(try await log.recordNotification(idHash: first, at: now), "recorded")
        try expect(try await log.hasNotification(idHash: first), "known once recorded")
        try expect(!(try await log.recordNotification(idHash: first, at: now)), "recorded once only")
        try expect(!(try await log.hasNotification(idHash: second)), "another id is independent")
        try expect(try await log.recordNotification(idHash: second, at: now), "the other recorded")
    }

    static func bearerTokens(_ make: MakeSubject) async throws {
        let tokens = try await make().tokenStore
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let hash = { (text: String) in Hashing.blake2b256(Array(text.utf8)) }
        let worker = AccessTokenRecord(name: "worker", scopes: [.replay, .confirm], hash: hash("t1"), createdAt: now)
        let app = AccessTokenRecord(name: "app", scopes: [.capture], hash: hash("t2"), createdAt: now)
        try await tokens.addToken(worker)
        try await tokens.addToken(app)
        try expect(try await tokens.tokens().map(\.name) == ["app", "worker"], "listed by name")
        try expect(try await tokens.token(hash: hash("t1")) == worker, "found by hash, scopes kept")
        try expect(try await tokens.token(hash: hash("unknown")) == nil, "an unknown hash finds nothing")
        do {
            try await tokens.addToken(AccessTokenRecord(name: "app", scopes: [.read], hash: hash("t3"), createdAt: now))
            throw ConformanceFailure("a second active token of one name was added")
        } catch let error as EscrowStoreError {
            try expect(error.code == .tokenExists, "refused as existing: \(error.code)")
        }
        try expect(try await tokens.revokeToken(name: "app", at: now.addingTimeInterval(5)), "revoked")
        try expect(!(try await tokens.revokeToken(name: "app", at: now)), "nothing active left to revoke")
        try expect(try await tokens.token(hash: hash("t2"))?.isRevoked == true, "a revoked token is seen as revoked")
        let again = AccessTokenRecord(name: "app", scopes: [.read], hash: hash("t3"), createdAt: now)
        try await tokens.addToken(again)
        try expect(try await tokens.token(hash: hash("t3")) == again, "a revoked name can be added again")
        try expect(try await tokens.token(hash: hash("t2")) == nil, "replacing the revoked token")
        try expect(!(try await tokens.revokeToken(name: "nobody", at: now)), "an unknown name")
    }

    private static func unwrap<T>(_ value: T?) throws -> T {
        guard let value else { throw ConformanceFailure("expected a value") }
        return value
    }
}
