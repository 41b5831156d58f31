import AsyncHTTPClient
import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import GRDB
import Logging
import NIOCore
import NIOHTTP1
import Testing

@testable import EscrowSQLite
@testable import ProfileEscrow

/// Every column of stored rows mutated in every way the STRICT schema lets a value be stored: range,
/// length, NULL where the column allows it, an unknown or invalid text, and values swapped between rows.
/// Over the store, once each: the worker in process, `replay --once`, and `serve` with its worker (which must
/// keep answering `/healthz`, `/readyz` and `/metrics`, and stop cleanly on SIGTERM). Nothing crashes, every
/// intact escrow is delivered, every row broken in a column the row MAC or the decoder covers ends dead with
/// `ciphertext_invalid`; every read and write CLI command (before any worker for `replay --once`, after it
/// otherwise) ends without a crash, and the reads succeed.
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
        // profile_box_key only lets an opener skip a multiplication, and is outside the MAC: a damaged one is ignored
        // and the escrow opened the long way.
        set("profile_box_key", "empty", "x''", broken: false)
        set("profile_box_key", "first byte changed", "CAST(x'01' || substr(profile_box_key, 2) AS BLOB)", broken: false)
        set("profile_box_key", "64 KiB", "zeroblob(65536)", broken: false)
        set("profile_box_key", "from another row", "(SELECT profile_box_key FROM escrow WHERE rowid = ?2)", broken: false)
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

    /// What runs over the mutated store: the worker in process, `replay --once`, or `serve` with its worker.
    enum Driver: String, CaseIterable, Sendable, CustomStringConvertible {
        case worker
        case replayOnce = "replay --once"
        case serve
        var description: String { rawValue }
    }

    @Test(arguments: Driver.allCases) func everyColumnEveryKind(driver: Driver) async throws {
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

        let keyring = fixture.harness.directory.path + "/keyring"
        try fixture.harness.keyring.write(path: keyring, overwrite: false)
        let environment = [
            "PROFILE_ESCROW_DATABASE": fixture.harness.databasePath, "PROFILE_ESCROW_KEYRING": keyring,
            "PROFILE_ESCROW_WEBHOOK_SECRET": fixture.secret,
        ]
        func cli(_ arguments: [String], stdin: String = "") async throws -> ProfileEscrowCLI.Result {
            try await ProfileEscrowCLI.run(
                arguments,
                stdin: stdin,
                environment: environment,
                in: fixture.harness.directory.path
            )
        }
        let intactIDs = Array(ids.suffix(intact))
        func state() throws -> (quarantined: Set<Int64>, remaining: Set<Int64>, rows: [Row]) {
            let rows = try fixture.store.pool.read { db in try Row.fetchAll(db, sql: "SELECT rowid, * FROM escrow") }
            let quarantined = rows.filter {
                ($0["state"] as String?) == "dead" && ($0["dead_code"] as String?) == "ciphertext_invalid"
            }
            return (Set(quarantined.map { $0["rowid"] as Int64 }), Set(rows.map { $0["rowid"] as Int64 }), rows)
        }

        // Every read and write command of the CLI over the store (for `replay --once`, over the rows as broken, before
        // any worker saw them): none crashes (132 SIGILL, 134 SIGABRT, 139 SIGSEGV), the reads answer.
        func everyCommand() async throws {
            let brokenIndex = mutations.firstIndex { $0.column == "attempts" && $0.kind == "-1" } ?? 0
            let commands: [(arguments: [String], mustSucceed: Bool)] = [
                (["status", Fake.userIdentifier(0)], false), (["status", Fake.userIdentifier(brokenIndex)], false),
                (["inspect", ids[0].hex], false), (["inspect", ids[brokenIndex].hex, "--format", "json"], false),
                (["list"], true), (["list", "--state", "dead"], true), (["list", "--format", "json"], true),
                (["purge-report", "--verify"], false), (["purge-report", "--format", "csv"], false),
                (["keys", "show"], true), (["keys", "export-public", "--out", keyring + ".public"], true),
                (["keys", "rewrap"], false), (["requeue", "--all-dead"], false), (["requeue", ids[1].hex], false),
                (["sweep"], true), (["confirm", Fake.userIdentifier(2)], false),
                (["erase", Fake.userIdentifier(3)], false),
            ]
            for command in commands {
                let result = try await cli(command.arguments)
                #expect(
                    result.status < 128,
                    "\(command.arguments) crashed: \(result.status) \(result.stderr.suffix(300))"
                )
                if command.mustSucceed {
                    #expect(result.status == 0, "\(command.arguments): \(result.status) \(result.stderr.suffix(300))")
                }
            }
        }

        switch driver {
        case .worker:
            let summary = try await fixture.worker().runOnce()
            _ = try await fixture.worker().runOnce()
            #expect(summary.confirmed >= intact)
        case .replayOnce:
            try await everyCommand()
            for _ in 0..<2 {
                let result = try await cli(["replay", "--once", "--backend", fixture.stub.url])
                #expect(result.status < 128, "replay --once crashed: \(result.status) \(result.stderr.suffix(300))")
            }
        case .serve:
            let port = try freePort()
            let process = ChildProcess()
            process.executableURL = ProfileEscrowCLI.binary
            process.arguments = [
                "serve", "--port", "\(port)", "--backend", fixture.stub.url, "--poll-interval", "50ms",
                "--backoff-base", "50ms", "--sweep-interval", "1s",
            ]
            var serveEnvironment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PROFILE_ESCROW_") }
            serveEnvironment.merge(environment) { $1 }
            process.environment = serveEnvironment
            let log = fixture.harness.directory.path + "/serve.log"
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            process.standardOutput = FileHandle(forWritingAtPath: log)
            process.standardError = FileHandle(forWritingAtPath: log)
            try process.run()
            defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
            let http = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { _ = http.shutdown() }
            let url = "http://127.0.0.1:\(port)"
            try await eventually("serve to answer", within: 60) {
                (try? await http.execute(HTTPClientRequest(url: url + "/healthz"), timeout: .seconds(1)).status) == .ok
            }
            // Its worker delivers every intact escrow and takes every broken row off the queue, while serve keeps
            // answering.
            try await eventually("serve's worker to deliver and quarantine", within: 45) {
                let now = try state()
                var delivered = true
                for id in intactIDs where try await fixture.store.record(id: id) != nil { delivered = false }
                return delivered
                    && brokenRows.isSubset(of: now.quarantined.union(rowIDs.filter { !now.remaining.contains($0) }))
            }
            #expect(process.isRunning, "serve is still running")
            for path in ["/healthz", "/readyz", "/metrics"] {
                let status = try await http.execute(HTTPClientRequest(url: url + path), timeout: .seconds(5)).status
                #expect(status == .ok, "\(path): \(status)")
            }
            kill(process.processIdentifier, SIGTERM)
            try await eventually("serve to stop", within: 30) { !process.isRunning }
            #expect(process.terminationStatus == 0, "serve: \(process.terminationStatus)")
        }

        for id in intactIDs { #expect(try await fixture.store.record(id: id) == nil, "every intact escrow delivered") }
        for id in intactIDs { #expect(!fixture.requests(id).isEmpty, "every intact escrow went to the backend") }
        let (quarantined, remaining, rows) = try state()
        for (index, mutation) in mutations.enumerated() where brokenRows.contains(rowIDs[index]) {
            // Dead as ciphertext_invalid, or (an expiry in the past) already purged by a retention sweep (or, for the
            // command run first, erased or confirmed by it).
            #expect(
                quarantined.contains(rowIDs[index]) || !remaining.contains(rowIDs[index]),
                "\(mutation) is quarantined"
            )
        }
        #expect(quarantined.count >= brokenRows.count - 6, "all but the expired ones quarantined, not purged")
        // What is left and not quarantined decodes and verifies: a valid row the worker left (not due, say).
        for row in rows where !quarantined.contains(row["rowid"] as Int64) {
            let record = try? SQLiteEscrowStore.record(from: row)
            #expect(record.map { fixture.harness.keyring.verify($0.sealed) } == true, "rowid \(row["rowid"] as Int64)")
        }
        if driver != .replayOnce { try await everyCommand() }
    }
}
