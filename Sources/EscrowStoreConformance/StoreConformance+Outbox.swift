import EscrowCore
import EscrowCrypto
import Foundation

/// The outbox of forwarded Apple notifications: queued once with the notification's record, claimed with a lease
/// (never by two claims at once), rescheduled only by the claim that holds an entry, deleted, and swept.
extension StoreConformance {
    static let outboxChecks: [Check] = [
        Check(name: "outbox queues a notification once, with its record, up to its capacity", run: outboxQueuesOnce),
        Check(name: "outbox queues one entry for each URL, each sent on its own", run: outboxQueuesOneEntryEachURL),
        Check(name: "outbox claims due entries with a lease", run: outboxClaimsWithLease),
        Check(name: "concurrent outbox claims never share an entry", run: outboxConcurrentClaims),
        Check(name: "outbox sweep deletes entries past the retention", run: outboxSweep),
    ]

    static func outboxQueuesOnce(_ make: MakeSubject) async throws {
        let outbox = try await make().outbox
        let fixture = OutboxFixture()
        let entry = try fixture.entry(1)
        // Records notification `number` with `forward`, the outbox holding 2 entries at most.
        let record = { (number: Int, forward: OutboxEntry) in
            try await outbox.recordNotification(
                idHash: fixture.idHash(number),
                at: fixture.start,
                forward: [forward],
                capacity: 2
            )
        }
        let queued = try await record(1, entry)
        try expect(queued == .queued, "queued: \(queued)")
        try expect(try await outbox.hasNotification(idHash: fixture.idHash(1)), "recorded with it")
        let again = try await record(1, entry)
        try expect(again == .duplicate, "a duplicate queues nothing: \(again)")
        // Another record (a jti hash) with the same webhook id is the same notification: one entry.
        let sameID = try await record(9, entry)
        let count = try await outbox.outboxCount()
        try expect(sameID == .queued && count == 1, "one entry a webhook id: \(sameID), \(count)")
        _ = try await record(2, try fixture.entry(2))
        let full = try await record(3, try fixture.entry(3))
        try expect(full == .full, "past the capacity, not queued: \(full)")
        try expect(try await outbox.hasNotification(idHash: fixture.idHash(3)), "but recorded as handled")
        let entries = try await outbox.outboxCount()
        try expect(entries == 2, "two entries: \(entries)")
        let claimed = try await outbox.claimOutbox(at: fixture.start, limit: 10, lease: 60)
        let stored = claimed.first { $0.webhookID == entry.webhookID }
        try expect(stored?.sealedBody == entry.sealedBody, "the sealed body read back as stored")
        try expect(stored?.keyVersion == entry.keyVersion && stored?.createdAt == entry.createdAt, "metadata kept")
    }

    /// A notification forwarded to two URLs: both entries queued in one record, each claimed, retried and deleted on
    /// its own; a record that would take the outbox past its capacity queues neither.
    static func outboxQueuesOneEntryEachURL(_ make: MakeSubject) async throws {
        let outbox = try await make().outbox
        let fixture = OutboxFixture()
        var second = try fixture.entry(1)
        second.webhookID += "~second"
        let recorded = try await outbox.recordNotification(
            idHash: fixture.idHash(1),
            at: fixture.start,
            forward: [try fixture.entry(1), second],
            capacity: 3
        )
        try expect(recorded == .queued, "queued: \(recorded)")
        try expect(try await outbox.outboxCount() == 2, "one entry a URL")
        let full = try await outbox.recordNotification(
            idHash: fixture.idHash(2),
            at: fixture.start,
            forward: [try fixture.entry(2), try fixture.entry(3)],
            capacity: 3
        )
        try expect(full == .full, "two more would pass the capacity: \(full)")
        try expect(try await outbox.outboxCount() == 2, "neither queued")
        let claimed = try await outbox.claimOutbox(at: fixture.start, limit: 10, lease: 60)
        try expect(Set(claimed.map(\.webhookID)) == [fixture.webhookID(1), second.webhookID], "both claimed")
        try expect(try await outbox.deleteOutbox(webhookID: second.webhookID), "one URL took it")
        try expect(
            try await outbox.rescheduleOutbox(webhookID: fixture.webhookID(1), attempts: 1, at: fixture.start),
            "the other is retried on its own"
        )
        let again = try await outbox.claimOutbox(at: fixture.start, limit: 10, lease: 60)
        try expect(again.map(\.webhookID) == [fixture.webhookID(1)], "only the one not taken: \(again)")
    }

    static func outboxClaimsWithLease(_ make: MakeSubject) async throws {
        let outbox = try await make().outbox
        let fixture = OutboxFixture()
        for number in 1...3 {
            try await fixture.queue(number, in: outbox, due: fixture.start.addingTimeInterval(Double(number)))
        }
        let later = fixture.start.addingTimeInterval(10)
        let first = try await outbox.claimOutbox(at: later, limit: 2, lease: 60)
        try expect(first.map(\.webhookID) == [fixture.webhookID(1), fixture.webhookID(2)], "the longest due first")
        try expect(first.allSatisfy { $0.attempts == 1 }, "a claim counts an attempt")
        try expect(first.allSatisfy { $0.nextAttemptAt == later.addingTimeInterval(60) }, "leased for 60 s")
        let second = try await outbox.claimOutbox(at: later, limit: 2, lease: 60)
        try expect(second.map(\.webhookID) == [fixture.webhookID(3)], "a leased entry is not claimed again")
        try expect(
            try await outbox.claimOutbox(at: later.addingTimeInterval(59), limit: 5, lease: 60).isEmpty,
            "leased"
        )
        let expired = try await outbox.claimOutbox(at: later.addingTimeInterval(61), limit: 5, lease: 600)
        try expect(expired.count == 3 && expired.allSatisfy { $0.attempts == 2 }, "back after the lease: \(expired)")
        let id = fixture.webhookID(1)
        try expect(
            !(try await outbox.rescheduleOutbox(webhookID: id, attempts: 1, at: later)),
            "an earlier claim reschedules nothing"
        )
        let retryAt = later.addingTimeInterval(200)
        try expect(try await outbox.rescheduleOutbox(webhookID: id, attempts: 2, at: retryAt), "the holder reschedules")
        try expect(
            try await outbox.claimOutbox(at: retryAt.addingTimeInterval(-1), limit: 5, lease: 1).isEmpty,
            "not due before its new time"
        )
        try expect(
            try await outbox.claimOutbox(at: retryAt, limit: 5, lease: 60).map(\.webhookID) == [id],
            "due at its new time"
        )
        try expect(try await outbox.deleteOutbox(webhookID: id), "deleted")
        try expect(!(try await outbox.deleteOutbox(webhookID: id)), "deleted once")
        try expect(try await outbox.outboxCount() == 2, "two left")
    }

    static func outboxConcurrentClaims(_ make: MakeSubject) async throws {
        let outbox = try await make().outbox
        let fixture = OutboxFixture()
        for number in 1...20 { try await fixture.queue(number, in: outbox, due: fixture.start) }
        let claims = try await withThrowingTaskGroup(of: [String].self) { group in
            for _ in 0..<8 {
                group.addTask { try await outbox.claimOutbox(at: fixture.start, limit: 3, lease: 60).map(\.webhookID) }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        try expect(Set(claims).count == claims.count, "no entry claimed twice: \(claims.sorted())")
        try expect(claims.count == 20, "every entry claimed once: \(claims.count)")
    }

    static func outboxSweep(_ make: MakeSubject) async throws {
        let outbox = try await make().outbox
        let fixture = OutboxFixture()
        try await fixture.queue(1, in: outbox, due: fixture.start)
        try await fixture.queue(2, in: outbox, due: fixture.start, createdAt: fixture.start.addingTimeInterval(100))
        let swept = try await outbox.sweepOutbox(createdBefore: fixture.start.addingTimeInterval(50))
        try expect(swept == [fixture.webhookID(1)], "the older entry swept, by id: \(swept)")
        try expect(try await outbox.outboxCount() == 1, "the newer one kept")
        try expect(try await outbox.sweepOutbox(createdBefore: fixture.start).isEmpty, "nothing older left")
    }
}

/// Entries sealed with a real keyring: stores see real ciphertexts.
struct OutboxFixture {
    let keyring = Keyring.generate()
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    func idHash(_ number: Int) -> [UInt8] { Hashing.blake2b256(Array("fake-outbox-jti-\(number)".utf8)) }
    func webhookID(_ number: Int) -> String { "apple-" + Hex.encode(idHash(number).prefix(16)) }

    func entry(_ number: Int, due: Date? = nil, createdAt: Date? = nil) throws -> OutboxEntry {
        let id = webhookID(number)
        let body = Array(#"{"type":"apple-notification","fake":\#(number)}"#.utf8)
        let (version, sealed) = try keyring.sealNotification(body, webhookID: id)
        return OutboxEntry(
            webhookID: id,
            keyVersion: version,
            sealedBody: sealed,
            nextAttemptAt: due ?? start,
            createdAt: createdAt ?? start
        )
    }

    func queue(_ number: Int, in outbox: any NotificationOutbox, due: Date, createdAt: Date? = nil) async throws {
        let recorded = try await outbox.recordNotification(
            idHash: idHash(number),
            at: start,
            forward: [try entry(number, due: due, createdAt: createdAt)],
            capacity: 1_000
        )
        try expect(recorded == .queued, "queued: \(recorded)")
    }
}
