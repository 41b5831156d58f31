import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import GRDB
import Logging
import Testing

@testable import EscrowSQLite
@testable import ProfileEscrow

/// Every column of stored rows mutated in every way the STRICT schema lets a value be stored: range,
/// length, NULL where the column allows it, an unknown or invalid text, and values swapped between rows.
/// The worker runs over the store: nothing crashes, every intact escrow is delivered, every row broken in a
/// column the row MAC or the decoder covers ends dead with `ciphertext_invalid`; no CLI command crashes.
@Suite("Row fuzzing", .serialized)
struct RowFuzzTests {
    /// A mutation of one row (`?` is its rowid, `?2` another row's); `broken` when it must end quarantined.
    struct Mutation: Sendable, CustomStringConvertible {
        let column: String
        let kind: String
        let sql: [String]
        let broken: Bool
        var description: String { "\(column) \(kind)" }
    }

    static let blobColumns = ["public_key", "sealed_profile", "sealed_key", "mac", "id", "blind_index"]
    static let integerColumns = [
        "key_version", "revision", "attempts", "next_attempt_at", "lease_expires_at", "confirm_deadline", "due_at",
        "created_at", "expires_at", "updated_at", "last_status",
    ]
    static let nullable: Set<String> = ["lease_expires_at", "confirm_deadline", "due_at", "last_status"]

    static var mutations: [Mutation] {
        var all: [Mutation] = []
        func set(_ column: String, _ kind: String, _ value: String, broken: Bool) {
            all.append(
                Mutation(
                    column: column,
                    kind: kind,
                    sql: ["UPDATE escrow SET \(column) = \(value) WHERE rowid = ?1"],
                    broken: broken
                )
            )
        }
        // Every blob is bound by the row MAC or checked for its length: any change breaks the row.
        for column in blobColumns {
            set(column, "empty", "x''", broken: true)
            set(column, "one byte", "x'00'", broken: true)
            set(column, "one byte short", "substr(\(column), 1, length(\(column)) - 1)", broken: true)
            set(column, "one byte long", "CAST(\(column) || x'00' AS BLOB)", broken: true)
            set(column, "64 KiB", "zeroblob(65536)", broken: true)
            set(column, "first byte changed", "CAST(x'01' || substr(\(column), 2) AS BLOB)", broken: true)
        }
        // content_tag only identifies repeated captures and is outside the MAC: a wrong one is no forgery.
        set("content_tag", "empty", "x''", broken: false)
        set("content_tag", "one byte long", "CAST(content_tag || x'00' AS BLOB)", broken: false)
        // Non-unique blobs copied from another row: the MAC names this row's id and version.
        for column in ["public_key", "sealed_profile", "sealed_key", "mac"] {
            set(column, "from another row", "(SELECT \(column) FROM escrow WHERE rowid = ?2)", broken: true)
        }
        // The unique ones swapped between two rows (both broken: each MAC names the other id).
        for column in ["id", "blind_index"] {
            all.append(Mutation(column: column, kind: "swapped", sql: [], broken: true))
        }
        for column in integerColumns {
            // The version is bound by the MAC; the others are ranges the decoder checks, or times that
            // only make a row due, expired or not (valid rows: delivered, swept or left).
            // Out of range for every column a pending row's decoding reads (times before 1970 or after 9999,
            // revisions past 2^53 - 1); 2^32 + 1 is out of range for the version, attempts and status only.
            let read = !["lease_expires_at", "confirm_deadline", "due_at"].contains(column)
            let small = ["key_version", "attempts", "last_status"].contains(column)
            set(column, "-1", "-1", broken: read)
            set(column, "Int64.min", "-9223372036854775808", broken: read)
            set(column, "Int64.max", "9223372036854775807", broken: read)
            set(column, "2^32+1", "4294967297", broken: small)
            if nullable.contains(column) { set(column, "NULL", "NULL", broken: false) }
        }
        set("state", "empty", "''", broken: true)
        set("state", "unknown", "'bogus'", broken: true)
        set("state", "invalid UTF-8", "CAST(x'ff' AS TEXT)", broken: true)
        set("state", "10 KiB", "hex(zeroblob(5120))", broken: true)
        set("lease_owner", "10 KiB without a lease", "hex(zeroblob(5120))", broken: false)
        set("lease_owner", "invalid UTF-8", "CAST(x'ff' AS TEXT)", broken: false)
        set("dead_code", "unknown, not dead", "'bogus'", broken: false)
        set("dead_code", "invalid UTF-8", "CAST(x'c3' AS TEXT)", broken: false)
        return all
    }

    @Test func everyColumnEveryKind() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .status(200) }
        let mutations = Self.mutations
        let intact = 5
        // Each mutation gets its own row, and one spare row for the swaps and copies (left intact).
        let ids = try await fixture.capture(0..<(mutations.count + intact + 2))
        let rowIDs = try await fixture.store.pool.read { db in
            try Int64.fetchAll(db, sql: "SELECT rowid FROM escrow ORDER BY rowid")
        }
        let spareA = rowIDs[mutations.count]
        for (index, mutation) in mutations.enumerated() {
            let rowID = rowIDs[index]
            // A swap's partner is the next mutated row's neighbour: the spare row keeps its own values.
            let partner = index + 1 < mutations.count ? rowIDs[index + 1] : spareA
            if mutation.kind == "swapped" {
                let column = mutation.column
                func value(_ row: Int64) async throws -> Data? {
                    try await fixture.store.pool.read { db in
                        try Data.fetchOne(db, sql: "SELECT \(column) FROM escrow WHERE rowid = ?", arguments: [row])
                    }
                }
                let own = try await value(rowID)
                let theirs = try await value(partner)
                // Through a temporary value: the column is unique.
                try await fixture.harness.tamper(
                    "UPDATE escrow SET \(column) = randomblob(32) WHERE rowid = ?",
                    [partner]
                )
                try await fixture.harness.tamper("UPDATE escrow SET \(column) = ? WHERE rowid = ?", [theirs, rowID])
                try await fixture.harness.tamper("UPDATE escrow SET \(column) = ? WHERE rowid = ?", [own, partner])
            }
            for sql in mutation.sql {
                try await fixture.harness.tamper(sql, sql.contains("?2") ? [rowID, spareA] : [rowID])
            }
        }
        // The swaps also broke their partners: those are broken whatever their own mutation was.
        var brokenRows = Set(mutations.indices.filter { mutations[$0].broken }.map { rowIDs[$0] })
        for (index, mutation) in mutations.enumerated() where mutation.kind == "swapped" {
            brokenRows.insert(index + 1 < mutations.count ? rowIDs[index + 1] : spareA)
        }

        let summary = try await fixture.worker().runOnce()
        _ = try await fixture.worker().runOnce()

        let intactIDs = Array(ids.suffix(intact))
        for id in intactIDs { #expect(try await fixture.store.record(id: id) == nil, "every intact escrow delivered") }
        #expect(summary.confirmed >= intact)

        let rows = try fixture.store.pool.read { db in
            try Row.fetchAll(db, sql: "SELECT rowid, * FROM escrow")
        }
        let quarantined = Set(
            rows.filter { ($0["state"] as String?) == "dead" && ($0["dead_code"] as String?) == "ciphertext_invalid" }
                .map { $0["rowid"] as Int64 }
        )
        let remaining = Set(rows.map { $0["rowid"] as Int64 })
        for (index, mutation) in mutations.enumerated() where brokenRows.contains(rowIDs[index]) {
            // Dead as ciphertext_invalid, or (an expiry in the past) already purged by the run's retention sweep.
            #expect(
                quarantined.contains(rowIDs[index]) || !remaining.contains(rowIDs[index]),
                "\(mutation) is quarantined"
            )
        }
        #expect(quarantined.count >= brokenRows.count - 4, "all but the expired ones quarantined, not purged")
        // What is left and not quarantined decodes and verifies: a valid row the worker left (not due, say).
        for row in rows where !quarantined.contains(row["rowid"] as Int64) {
            let record = try? SQLiteEscrowStore.record(from: row)
            #expect(record.map { fixture.harness.keyring.verify($0.sealed) } == true, "rowid \(row["rowid"] as Int64)")
        }

        // The CLI over the same store: no crash (132 SIGILL, 134 SIGABRT, 139 SIGSEGV).
        let keyring = fixture.harness.directory.path + "/keyring"
        try fixture.harness.keyring.write(path: keyring, overwrite: false)
        let environment = ["PROFILE_ESCROW_DATABASE": fixture.harness.databasePath, "PROFILE_ESCROW_KEYRING": keyring]
        for arguments in [
            ["status", Fake.userIdentifier(0)], ["purge-report", "--verify"], ["sweep"], ["list"], ["keys", "show"],
        ] {
            let result = try ProfileEscrowCLI.run(
                arguments,
                environment: environment,
                in: fixture.harness.directory.path
            )
            #expect(![132, 134, 139].contains(result.status) && result.status < 128, "\(arguments): \(result.status)")
        }
    }
}
