import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import GRDB
import Logging
import Testing

@testable import EscrowSQLite
@testable import ProfileEscrow

/// The MAC decides before anything else: a key version forged to one nobody holds is dead, not pending for ever; a
/// row sealed to a version this worker lacks, with a valid MAC, is left for a worker that can open it. Read paths
/// that meet a malformed row quarantine (or, for an erasure, purge) it through the lifecycle and say so, never as an
/// unavailable store.
@Suite("Forged key versions and malformed rows on read paths")
struct ForgedAndMalformedReadTests {
    @Test func aKeyVersionForgedToOneNobodyHoldsGoesDead() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .status(200) }
        let ids = try await fixture.capture(0..<3)
        try await fixture.harness.tamper("UPDATE escrow SET key_version = 7 WHERE id = ?", [Data(ids[0].bytes)])

        let summary = try await fixture.worker().runOnce()
        #expect(summary.confirmed == 2, "\(summary)")
        let forged = try #require(try await fixture.store.record(id: ids[0]))
        #expect(forged.state == .dead && forged.deadCode == .ciphertextInvalid)
        #expect(try await fixture.types(ids[0]) == ["captured", "dead"])
        #expect(fixture.requests(ids[0]).isEmpty, "a forged row is never delivered")
        #expect(try await fixture.worker().runOnce().delivered == 0)
    }

    @Test func aRowWithAValidMACSealedToAVersionThisWorkerLacksIsLeftPending() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .status(200) }
        // Sealed by a node whose keyring already rotated to version 2; this worker's keyring has version 1 only.
        let rotated = try fixture.harness.keyring.rotated(now: Date())
        let newer = Escrow(
            store: fixture.store,
            keyring: rotated,
            configuration: fixture.escrow.configuration,
            logger: Logger(label: "test")
        )
        let sealedToTwo = try await newer.capture(try Fake.profile(1)).escrowID
        let sealedToOne = try await fixture.capture(2..<3)[0]

        let summary = try await fixture.worker().runOnce()
        #expect(summary.confirmed == 1, "\(summary)")
        #expect(try await fixture.store.record(id: sealedToOne) == nil)
        let left = try #require(try await fixture.store.record(id: sealedToTwo))
        #expect(left.state == .pending && left.attempts == 0, "left intact for a worker that can open it")
        #expect(try await fixture.types(sealedToTwo) == ["captured"])
    }

    @Test func readPathsQuarantineAMalformedRowAndErasurePurgesIt() async throws {
        let fixture = try await ReplayFixture()
        let ids = try await fixture.capture(0..<2)
        // A 15-byte id: no escrow id at all.
        try await fixture.harness.tamper(
            "UPDATE escrow SET id = x'000102030405060708090a0b0c0d0e' WHERE id = ?",
            [Data(ids[0].bytes)]
        )
        try await fixture.harness.tamper("UPDATE escrow SET attempts = -3 WHERE id = ?", [Data(ids[1].bytes)])

        // Status and replay: a clear ciphertext_invalid, the row moved to dead once.
        await #expect(throws: EscrowError.self) {
            _ = try await fixture.escrow.status(userIdentifier: Fake.userIdentifier(0))
        }
        do {
            _ = try await fixture.escrow.replay(userIdentifier: Fake.userIdentifier(0))
            Issue.record("a malformed row opened")
        } catch let error as EscrowError {
            #expect(error.code == .ciphertextInvalid, "\(error)")
        }
        let dead = try await fixture.allEvents().filter { $0.type == .dead }
        #expect(dead.count == 1 && dead[0].escrowID == "000102030405060708090a0b0c0d0e")
        #expect(dead.first?.detail == DeadCode.ciphertextInvalid.rawValue)

        // The purge report lists the dead row, malformed id and all.
        let report = try await PurgeReport.build(store: fixture.store, verify: true)
        #expect(report.dead.map(\.idHex) == ["000102030405060708090a0b0c0d0e"])
        #expect(report.dead.first?.code == .ciphertextInvalid)

        // Erasure and confirmation delete a malformed row, with their purge events.
        #expect(try await fixture.escrow.erase(userIdentifier: Fake.userIdentifier(0)))
        #expect(try await fixture.escrow.confirm(userIdentifier: Fake.userIdentifier(1)))
        #expect(try await fixture.store.pool.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM escrow") } == 0)
        let purged = try await fixture.allEvents().filter { $0.type == .purged }.compactMap(\.detail)
        #expect(purged.sorted() == ["confirmed", "erased"])
        #expect(report.chain?.verified == true)
        #expect(try await PurgeReport.build(store: fixture.store, verify: true).chain?.verified == true)
        #expect(try await fixture.escrow.erase(userIdentifier: Fake.userIdentifier(0)) == false, "nothing held now")
    }

    @Test func theLifecycleDecidesAMalformedRowsRevision() {
        let lifecycle = EscrowLifecycle()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        func row(revision: Int64?, quarantined: Bool = false) -> MalformedEscrowRow {
            MalformedEscrowRow(
                rowID: 9,
                column: "attempts",
                idBytes: [1, 2],
                blindIndexBytes: Array(0..<32),
                storedRevision: revision,
                isQuarantined: quarantined
            )
        }
        guard
            case .quarantine(let bumped, _, let drafts) = lifecycle.handle(
                .quarantine,
                on: row(revision: 4),
                at: now,
                actor: .cli
            ).change
        else {
            Issue.record("a malformed row is quarantined")
            return
        }
        #expect(bumped == 5 && drafts.map(\.type) == [.dead] && drafts.first?.escrowID == "0102")
        #expect(drafts.first?.indexPrefix == "0001020304050607")
        guard
            case .quarantine(let restarted, _, let none) = lifecycle.handle(
                .quarantine,
                on: row(revision: -1, quarantined: true),
                at: now,
                actor: .cli
            ).change
        else {
            Issue.record("a malformed row is quarantined")
            return
        }
        #expect(restarted == 0 && none.isEmpty, "out of range restarts at 0; already quarantined appends nothing")
        let top = lifecycle.handle(
            .quarantine,
            on: row(revision: EscrowRecord.storedRevisions.upperBound),
            at: now,
            actor: .cli
        )
        guard case .quarantine(let revision, _, _) = top.change else {
            Issue.record("a malformed row at the top revision is quarantined")
            return
        }
        #expect(revision == 0, "the top revision restarts at 0 instead of overflowing")
        let purge = lifecycle.handle(.purge(.erased), on: row(revision: nil), at: now, actor: .cli)
        #expect(purge.change == .delete(.erased, purge.auditDrafts) && purge.auditDrafts.first?.detail == "erased")
    }
}
