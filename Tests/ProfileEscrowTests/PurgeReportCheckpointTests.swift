import EscrowCore
import EscrowSQLite
import EscrowTestSupport
import Foundation
import GRDB
import ProfileEscrow
import Testing

/// The purge report verified from the store's recorded checkpoint (the console's page): the same counts as a report
/// that reads the whole trail, only the events after the checkpoint read, and what it took as recorded said.
@Suite("Purge report from the recorded checkpoint")
struct PurgeReportCheckpointTests {
    /// Captures users `range` and erases every other one.
    static func traffic(_ fixture: EscrowFixture, _ range: Range<Int>) async throws {
        for number in range {
            _ = try await fixture.escrow.capture(try Fake.profile(number))
            if number.isMultiple(of: 2) {
                _ = try await fixture.escrow.erase(userIdentifier: Fake.userIdentifier(number))
            }
        }
    }

    static func whole(_ fixture: EscrowFixture, now: Date) async throws -> PurgeReport {
        var report = try await PurgeReport.build(store: fixture.store, until: now, verify: true, now: now)
        report.chain?.recorded = nil
        return report
    }

    @Test("counts as the whole trail; later loads read only the events after the checkpoint; the report says so")
    func sameReportFromTheCheckpoint() async throws {
        let fixture = try EscrowFixture()
        try await Self.traffic(fixture, 0..<6)
        let now = fixture.clock.now()
        let first = try await PurgeReport.buildFromCheckpoint(store: fixture.store, now: now)
        #expect(first.chain?.verified == true && first.chain?.recorded == nil, "the first reads the whole chain")
        #expect(first == (try await Self.whole(fixture, now: now)))
        let recorded = try #require(try await fixture.store.purgeReportCheckpoint())
        #expect(recorded.through == (try await fixture.store.auditHead()), "the verified head is recorded")

        try await Self.traffic(fixture, 6..<9)
        fixture.clock.advance(by: 60)
        let later = fixture.clock.now()
        var next = try await PurgeReport.buildFromCheckpoint(store: fixture.store, now: later)
        #expect(next.chain?.recorded?.through == recorded.through.sequence, "went on from the checkpoint")
        #expect(next.chain?.verified == true)
        next.chain?.recorded = nil
        #expect(next == (try await Self.whole(fixture, now: later)), "the same report as reading every event")
        #expect(try await fixture.store.purgeReportCheckpoint()?.through == (try await fixture.store.auditHead()))
    }

    @Test("an event changed after the checkpoint breaks the report; one before it is left to a whole verification")
    func tamperingAfterTheCheckpoint() async throws {
        let fixture = try EscrowFixture()
        try await Self.traffic(fixture, 0..<4)
        _ = try await PurgeReport.buildFromCheckpoint(store: fixture.store, now: fixture.clock.now())
        let through = try #require(try await fixture.store.purgeReportCheckpoint()).through.sequence
        try await Self.traffic(fixture, 4..<6)
        try await fixture.tamper("UPDATE audit_event SET actor = 'cli' WHERE seq = ?", [through + 1])
        let broken = try await PurgeReport.buildFromCheckpoint(store: fixture.store, now: fixture.clock.now())
        #expect(broken.chain?.verified == false && broken.chain?.firstBrokenSequence == through + 1)
        #expect(
            try await fixture.store.purgeReportCheckpoint()?.through.sequence == through,
            "a broken report records nothing"
        )
        // An event before the checkpoint changed: this page does not read it again (it says so), a whole
        // verification does.
        try await fixture.tamper("UPDATE audit_event SET actor = 'library' WHERE seq = ?", [through + 1])
        try await fixture.tamper("UPDATE audit_event SET actor = 'cli' WHERE seq = 2")
        let page = try await PurgeReport.buildFromCheckpoint(store: fixture.store, now: fixture.clock.now())
        #expect(page.chain?.verified == true && page.chain?.recorded?.through == through)
        let whole = try await Self.whole(fixture, now: fixture.clock.now())
        #expect(whole.chain?.verified == false && whole.chain?.firstBrokenSequence == 2)
    }
}
