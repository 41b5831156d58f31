import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import GRDB
import Logging
import Testing

@testable import EscrowSQLite
@testable import ProfileEscrow

/// Stored rows broken in every column a decoder reads (out of range, wrong length, unknown value, a state
/// without what it needs): the worker quarantines each alone as dead (`ciphertext_invalid`), delivers every
/// intact escrow, and no command over the store crashes.
@Suite("Malformed rows", .serialized)
struct MalformedRowTests {
    static let mutations: [(name: String, sql: String)] = [
        ("key_version -1", "UPDATE escrow SET key_version = -1 WHERE rowid = ?"),
        ("key_version 2^32+1", "UPDATE escrow SET key_version = 4294967297 WHERE rowid = ?"),
        ("empty id", "UPDATE escrow SET id = x'' WHERE rowid = ?"),
        ("15-byte id", "UPDATE escrow SET id = x'000102030405060708090a0b0c0d0e' WHERE rowid = ?"),
        ("5-byte blind index", "UPDATE escrow SET blind_index = x'0102030405' WHERE rowid = ?"),
        ("unknown state", "UPDATE escrow SET state = 'bogus' WHERE rowid = ?"),
        ("leased without owner", "UPDATE escrow SET state = 'leased', lease_owner = NULL WHERE rowid = ?"),
        ("dead without code", "UPDATE escrow SET state = 'dead', dead_code = NULL WHERE rowid = ?"),
        ("negative attempts", "UPDATE escrow SET attempts = -5 WHERE rowid = ?"),
        ("status out of range", "UPDATE escrow SET last_status = 100000 WHERE rowid = ?"),
        ("awaiting without deadline", "UPDATE escrow SET state = 'awaiting-confirmation' WHERE rowid = ?"),
        (
            "quarantined, then made due again",
            "UPDATE escrow SET state = 'dead', dead_code = 'ciphertext_invalid', key_version = -7 WHERE rowid = ?"
        ),
    ]

    @Test func everyBrokenRowIsQuarantinedAloneAndEveryIntactOneDelivered() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .status(200) }
        let intact = 4
        let ids = try await fixture.capture(0..<(Self.mutations.count + intact))
        let rowIDs = try await fixture.store.pool.read { db in
            try Int64.fetchAll(db, sql: "SELECT rowid FROM escrow ORDER BY rowid")
        }
        for (mutation, rowID) in zip(Self.mutations, rowIDs) {
            try await fixture.harness.tamper(mutation.sql, [rowID])
        }
        // Dead rows are not due: make them due, as a careless UPDATE would.
        try await fixture.harness.tamper("UPDATE escrow SET due_at = created_at WHERE state = 'dead'")

        let summary = try await fixture.worker().runOnce()
        #expect(summary.confirmed == intact, "\(summary)")
        for id in ids.suffix(intact) { #expect(try await fixture.store.record(id: id) == nil, "intact ones purged") }

        let quarantined = try await fixture.store.pool.read { db in
            try Int.fetchOne(
                db,
                sql: "SELECT COUNT(*) FROM escrow WHERE state = 'dead' AND dead_code = 'ciphertext_invalid'"
            )
        }
        #expect(quarantined == Self.mutations.count, "every broken row is dead, alone")
        let deadEvents = try await fixture.allEvents().filter { $0.type == .dead && $0.detail == "ciphertext_invalid" }
        // The row that was already marked dead is taken off the queue without a second event.
        #expect(deadEvents.count == Self.mutations.count - 1)
        #expect(try await fixture.worker().runOnce().delivered == 0, "nothing broken is claimed again")

        // Every command over the store: no crash (132 SIGILL, 134 SIGABRT, 139 SIGSEGV), a clear answer.
        let keyring = fixture.harness.directory.path + "/keyring"
        try fixture.harness.keyring.write(path: keyring, overwrite: false)
        let environment = ["PROFILE_ESCROW_DATABASE": fixture.harness.databasePath, "PROFILE_ESCROW_KEYRING": keyring]
        for arguments in [
            ["purge-report", "--verify"], ["list"], ["list", "--state", "dead"], ["sweep"], ["keys", "show"],
            ["keys", "rewrap"], ["requeue", "--all-dead"], ["status", Fake.userIdentifier(0)],
            ["inspect", ids[0].hex],
        ] {
            let result = try await ProfileEscrowCLI.run(
                arguments,
                environment: environment,
                in: fixture.harness.directory.path
            )
            #expect(result.status < 128, "\(arguments) crashed: \(result.status) \(result.stderr.suffix(300))")
        }

        // Past retention, the broken rows are purged as expired like any other: retention holds for them too.
        fixture.advance(by: 31 * 86_400)
        #expect(try await fixture.escrow.sweep() == Self.mutations.count)
        #expect(try await fixture.store.pool.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM escrow") } == 0)
        let report = try await PurgeReport.build(store: fixture.store, verify: true)
        #expect(report.chain?.verified == true && report.purged[.expired] == Self.mutations.count)
    }
}
