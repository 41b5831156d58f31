import AsyncHTTPClient
import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import GRDB
import Glibc
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import ProfileEscrow
import Testing

@testable import EscrowSQLite

/// `audit archive`, `audit verify` and `purge-report` over archived periods, run as an operator would: the real
/// binary on a real SQLite file the library fills, segments tampered with as an attacker would.
@Suite("Audit archive")
struct AuditArchiveTests {
    let harness: EscrowFixture

    init() throws { harness = try EscrowFixture() }

    var folder: String { harness.directory.path }

    func cli(_ arguments: [String], database: String? = nil) async throws -> ProfileEscrowCLI.Result {
        try await ProfileEscrowCLI.run(
            arguments,
            environment: ["PROFILE_ESCROW_DATABASE": database ?? harness.databasePath],
            in: folder
        )
    }

    /// Without a store: `audit verify` on the segments alone.
    func verifyAlone(_ segments: [String]) async throws -> ProfileEscrowCLI.Result {
        try await ProfileEscrowCLI.run(["audit", "verify"] + segments, in: folder)
    }

    var later: String { Timestamp.seconds(Date().addingTimeInterval(3600)) }

    func capture(_ numbers: Range<Int>) async throws {
        for number in numbers { _ = try await harness.escrow.capture(try Fake.profile(number)) }
    }

    func confirm(_ numbers: Range<Int>) async throws {
        for number in numbers { #expect(try await harness.escrow.confirm(userIdentifier: Fake.userIdentifier(number))) }
    }

    func lines(_ path: String) -> [String] {
        ProfileEscrowCLI.text(atPath: path).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    /// A copy of `path` with its lines changed by `change`.
    func tampered(_ path: String, _ name: String, _ change: (inout [String]) -> Void) throws -> String {
        var content = lines(path)
        change(&content)
        let copy = folder + "/" + name
        try Data(content.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: copy))
        return copy
    }

    func reportJSON(_ arguments: [String]) async throws -> [String: Any] {
        let result = try await cli(["purge-report", "--format", "json"] + arguments)
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    /// Two cuts, then every kind of damage to the segments is named; the report counts archived periods from the
    /// segments and says which period it cannot cover without them.
    @Test func archiveVerifyAndNameEveryTampering() async throws {
        try await capture(0..<10)
        try await confirm(0..<10)
        try await capture(10..<15)
        let before = try await reportJSON([])
        #expect(before["captured"] as? Int == 15)

        let segment1 = folder + "/audit-1.jsonl"
        let first = try await cli(["audit", "archive", "--before", later, "--out", segment1])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("archived 20 events (sequences 1-20)"), "\(first.stdout)")
        #expect(first.stdout.contains("escrow still in the store"), "stopped by user 10, live")
        // Nothing more can go while user 10 is live: no file.
        let nothing = try await cli(["audit", "archive", "--before", later, "--out", folder + "/none.jsonl"])
        #expect(nothing.status == 0 && nothing.stdout.contains("nothing to archive"), "\(nothing.stdout)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/none.jsonl"))
        // A segment is never overwritten.
        #expect(try await cli(["audit", "archive", "--before", later, "--out", segment1]).status == 2)

        try await confirm(10..<15)
        try await capture(15..<18)
        let segment2 = folder + "/audit-2.jsonl"
        let second = try await cli([
            "audit", "archive", "--before", later, "--out", segment2, "--redact-prefixes", "--chunk", "4",
        ])
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stdout.contains("deleted in 3 transaction(s)"), "10 events, 4 a transaction: \(second.stdout)")
        #expect(try await harness.store.auditCheckpoints().count == 4, "one checkpoint a transaction")
        let redacted = ProfileEscrowCLI.text(atPath: segment2)
        #expect(redacted.contains("\"prefix_commitment\":\"") && !redacted.contains("\"prefix\":\""))
        #expect(ProfileEscrowCLI.text(atPath: segment1).contains("\"prefix\":\""), "the first cut kept prefixes")
        for token in Fake.tokens {
            #expect(!redacted.contains(token) && !ProfileEscrowCLI.text(atPath: segment1).contains(token))
        }

        // Whole history: segments alone, then chained into the store's checkpoint and the store's chain.
        let alone = try await verifyAlone([segment1, segment2])
        #expect(alone.status == 0, "\(alone.stdout)\(alone.stderr)")
        let whole = try await cli(["audit", "verify", segment1, segment2, "--database", harness.databasePath])
        #expect(whole.status == 0, "\(whole.stdout)\(whole.stderr)")
        #expect(whole.stdout.contains("chain into the store's checkpoint"), "\(whole.stdout)")
        #expect(whole.stdout.contains("store chain: verified"), "\(whole.stdout)")

        // A compressed segment, verified through a pipe (read once).
        let piped = try await ProfileEscrowCLI.run(
            [
                "-c", "gzip -c \"$1\" > \"$1.gz\" && \"$0\" audit verify <(gzip -dc \"$1.gz\")",
                ProfileEscrowCLI.binary.path, segment1,
            ],
            executable: "/bin/bash",
            in: folder
        )
        #expect(
            piped.status == 0 && piped.stdout.contains("sequences 1-20, 20 events"),
            "\(piped.stdout)\(piped.stderr)"
        )
        // Reordered segments, a dropped first or last segment.
        let reordered = try await verifyAlone([segment2, segment1])
        #expect(
            reordered.status == 1 && reordered.stdout.contains("audit-2.jsonl: given out of order"),
            "\(reordered.stdout)"
        )
        let droppedFirst = try await cli(["audit", "verify", segment2, "--database", harness.databasePath])
        #expect(droppedFirst.status == 1, "\(droppedFirst.stdout)")
        #expect(
            droppedFirst.stdout.contains("archived sequences 1-20, which are in none of the segments given"),
            "\(droppedFirst.stdout)"
        )
        let droppedLast = try await cli(["audit", "verify", segment1, "--database", harness.databasePath])
        #expect(droppedLast.status == 1 && droppedLast.stdout.contains("are missing"), "\(droppedLast.stdout)")
        let twice = try await verifyAlone([segment1, segment1])
        #expect(twice.status == 0 && twice.stdout.contains("repeats sequences 1-20"), "\(twice.stdout)")

        // Damage inside a segment: each named by file, line and sequence.
        let purgedLine = try #require(lines(segment1).firstIndex { $0.contains("\"type\":\"purged\"") })
        let altered = try tampered(segment1, "altered.jsonl") {
            $0[purgedLine] = $0[purgedLine].replacingOccurrences(
                of: "\"detail\":\"confirmed\"",
                with: "\"detail\":\"expired\""
            )
        }
        let alteredResult = try await verifyAlone([altered, segment2])
        #expect(alteredResult.status == 1)
        #expect(
            alteredResult.stdout.contains(
                "altered.jsonl: line \(purgedLine + 1) (sequence \(purgedLine)): its content does not match"
            ),
            "\(alteredResult.stdout)"
        )
        let dropped = try tampered(segment1, "dropped.jsonl") { $0.remove(at: 5) }
        let droppedResult = try await verifyAlone([dropped])
        #expect(droppedResult.status == 1)
        #expect(
            droppedResult.stdout.contains(
                "dropped.jsonl: line 6 (sequence 6): sequence 5 was expected after 4: events 5-5 dropped or moved"
            ),
            "\(droppedResult.stdout)"
        )
        let swapped = try tampered(segment1, "swapped.jsonl") { $0.swapAt(3, 4) }
        let swappedResult = try await verifyAlone([swapped])
        #expect(swappedResult.status == 1)
        #expect(swappedResult.stdout.contains("swapped.jsonl: line 4 (sequence 4)"), "\(swappedResult.stdout)")
        let truncated = try tampered(segment1, "truncated.jsonl") { $0.removeLast(4) }
        await #expect(try verifyAlone([truncated]).stdout.contains("no trailer after line"))
        let header = try tampered(segment1, "header.jsonl") {
            $0[0] = $0[0].replacingOccurrences(of: "\"prefixes\":\"kept\"", with: "\"prefixes\":\"redacted\"")
        }
        await #expect(try verifyAlone([header]).stdout.contains("the file hash does not match"))
        await #expect(try verifyAlone(["/nonexistent/segment.jsonl"]).status == 2)

        // The store's chain starts at the checkpoint; the report says so.
        let verified = try await reportJSON(["--verify"])
        let chain = try #require(verified["chain"] as? [String: Any])
        #expect(chain["verified"] as? Bool == true)
        #expect((chain["fromSequence"] as? Int ?? 0) > 21)
        // A period reaching before the checkpoint: named as not covered without segments, counted with them.
        let text = try await cli(["purge-report", "--since", "30d"])
        #expect(text.stdout.contains("NOT COVERED"), "\(text.stdout)")
        let uncovered = try await #require(try reportJSON(["--since", "30d"])["archive"] as? [String: Any])
        #expect(uncovered["uncoveredFromSequence"] as? Int == 1)
        let covered = try await reportJSON(["--since", "30d", "--verify", "--archive", segment1, segment2])
        #expect(covered["captured"] as? Int == 18)
        #expect((covered["purged"] as? [String: Int])?["confirmed"] == 15)
        #expect((covered["archive"] as? [String: Any])?["uncoveredFromSequence"] is NSNull)
        #expect((covered["chain"] as? [String: Any])?["verified"] as? Bool == true)
        // A period of the first cut needs only its segment; without the second, its period is named, not a problem.
        let firstOnly = try await cli(["purge-report", "--since", "30d", "--verify", "--archive", segment1])
        #expect(firstOnly.status == 0 && firstOnly.stdout.contains("NOT COVERED"), "\(firstOnly.stdout)")
        let broken = try await cli(["purge-report", "--verify", "--archive", altered, segment2])
        #expect(broken.status == 1 && broken.stdout.contains("its content does not match"), "\(broken.stdout)")
        let brokenCount = try await cli(["purge-report", "--archive", altered, segment2])
        #expect(brokenCount.status == 1 && brokenCount.stdout.contains("SEGMENT PROBLEM"), "\(brokenCount.stdout)")
        // A period after the checkpoint needs no segment.
        let recent = try await reportJSON(["--since", Timestamp.seconds(Date().addingTimeInterval(1800))])
        #expect((recent["archive"] as? [String: Any])?["uncoveredFromSequence"] is NSNull)
    }

    /// An archive that stops between two of its delete transactions loses nothing: the segment is complete, the store
    /// still holds what it did not delete, and archiving again repeats those events in a new segment that verifies
    /// with the first, each event counted once.
    @Test func anArchiveInterruptedBetweenTransactionsLosesNothing() async throws {
        try await capture(0..<10)
        try await confirm(0..<10)
        let observed = ObservedStore(harness.store)
        observed.failArchiveCommits(after: 2)
        let first = folder + "/audit-1.jsonl"
        let until = Date().addingTimeInterval(3600)
        do {
            _ = try await AuditArchiver.archive(
                store: observed,
                before: until,
                to: first,
                redactPrefixes: false,
                actor: .cli,
                chunk: 7
            )
            Issue.record("the archive was not interrupted")
        } catch {
            #expect((error as? EscrowStoreError)?.message.contains("is complete") == true, "\(error)")
        }
        #expect(FileManager.default.fileExists(atPath: first))
        #expect(try await harness.store.auditCheckpoint()?.sequence == 14, "two transactions of 7 went through")
        let partial = try await AuditArchiveVerification.verify(paths: [first], store: harness.store)
        #expect(partial.isIntact, "\(partial.problems)")
        #expect(
            partial.notes.contains { $0.contains("still holds sequence 20 with the same hash") },
            "\(partial.notes)"
        )

        let second = folder + "/audit-2.jsonl"
        let again = try await AuditArchiver.archive(
            store: harness.store,
            before: until,
            to: second,
            redactPrefixes: false,
            actor: .cli,
            chunk: 7
        )
        #expect(again.checkpoint?.firstSequence == 15 && again.checkpoint?.sequence == 20)
        var captured = 0
        let both = try await AuditArchiveVerification.verify(paths: [first, second], store: harness.store) { event in
            if event.draft.type == .captured { captured += 1 }
        }
        #expect(both.isIntact, "\(both.problems)")
        #expect(both.notes.contains { $0.contains("identical") }, "\(both.notes)")
        #expect(captured == 10, "each archived capture counted once")
    }

    /// A store upgraded with events of the v1 encoding (hashed over the prefix itself): they verify beside the v2 ones,
    /// and a redacted segment keeps their prefixes, and says how many.
    @Test func eventsOfTheFirstEncodingVerifyAndKeepTheirPrefix() async throws {
        try await capture(0..<3)
        // Rewrite the three events as a store written before encoding 2 holds them.
        var previous = AuditChain.genesis
        for event in try await harness.store.auditEvents(after: 0, limit: 10) {
            let hash = AuditChain.hash(previous: previous, sequence: event.sequence, draft: event.draft, encoding: .v1)
            try await harness.tamper(
                "UPDATE audit_event SET hash = ?, encoding = 1 WHERE seq = ?",
                [Data(hash), event.sequence]
            )
            previous = hash
        }
        try await harness.tamper("UPDATE audit_head SET hash = ? WHERE singleton = 1", [Data(previous)])
        try await confirm(0..<3)
        #expect(try await cli(["purge-report", "--verify"]).status == 0, "v1 then v2 events verify")
        let segment = folder + "/audit-1.jsonl"
        let archived = try await cli(["audit", "archive", "--before", later, "--out", segment, "--redact-prefixes"])
        #expect(archived.status == 0, "\(archived.stderr)")
        #expect(archived.stdout.contains("3 events predate the v2 encoding"), "\(archived.stdout)")
        let lines = self.lines(segment)
        #expect(lines[1].contains("\"enc\":1") && lines[1].contains("\"prefix\":\""))
        // Events appended now are of the current encoding (3 since operator reasons), which commits to the prefix too.
        #expect(lines[4].contains("\"enc\":3") && lines[4].contains("\"prefix_commitment\":\""))
        let verified = try await cli(["audit", "verify", segment, "--database", harness.databasePath])
        #expect(verified.status == 0, "\(verified.stdout)")
    }

    /// A store restored from a backup taken before a cut still holds the cut's events: `audit verify` says so, and
    /// the backup's own chain still verifies.
    @Test func aStoreRestoredFromBeforeACutIsRecognized() async throws {
        try await capture(0..<5)
        try await confirm(0..<5)
        let backup = folder + "/backup.sqlite"
        try await harness.store.pool.writeWithoutTransaction {
            try $0.execute(sql: "VACUUM INTO ?", arguments: [backup])
        }
        let segment = folder + "/audit-1.jsonl"
        #expect(try await cli(["audit", "archive", "--before", later, "--out", segment]).status == 0)
        let restored = try await cli(["audit", "verify", segment, "--database", backup], database: backup)
        #expect(restored.status == 0, "\(restored.stdout)\(restored.stderr)")
        #expect(restored.stdout.contains("restored from a backup"), "\(restored.stdout)")
        let report = try await cli(["purge-report", "--verify"], database: backup)
        #expect(report.status == 0, "\(report.stdout)")
        // Cutting the restored store again repeats the segment's events, identical: verified, counted once.
        let again = folder + "/audit-again.jsonl"
        #expect(try await cli(["audit", "archive", "--before", later, "--out", again], database: backup).status == 0)
        let both = try await cli(["audit", "verify", segment, again, "--database", backup], database: backup)
        #expect(both.status == 0 && both.stdout.contains("identical"), "\(both.stdout)")
        let counted = try await cli(
            ["purge-report", "--since", "30d", "--format", "json", "--archive", segment, again],
            database: backup
        )
        let json = try #require(try JSONSerialization.jsonObject(with: Data(counted.stdout.utf8)) as? [String: Any])
        #expect(json["captured"] as? Int == 5, "the repeated events are counted once")
    }

    /// `serve` with its worker under HTTP load while an operator cuts the trail again and again: every cut succeeds
    /// or has nothing to take, no event of an escrow still held at the end is in a segment, every acknowledged
    /// capture's event is in exactly one place (a segment or the store), and segments plus store verify as one chain.
    @Test func archivingWhileServeAndItsWorkerRun() async throws {
        let keyring = folder + "/keyring"
        let base = ["PROFILE_ESCROW_DATABASE": harness.databasePath, "PROFILE_ESCROW_KEYRING": keyring]
        func run(_ arguments: [String]) async throws -> ProfileEscrowCLI.Result {
            try await ProfileEscrowCLI.run(arguments, environment: base, in: folder)
        }
        #expect(try await run(["keys", "init"]).status == 0)
        let token = try await run(["tokens", "add", "load", "--scope", "capture"])
        let bearer = token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let secret = WebhookSecret.generateText()
        let stub = try await FakeBackend.start(secret: secret)
        defer { Task { await stub.stop() } }
        stub.respond { _, _ in .status(200) }
        let port = try freePort()
        let processes = ProfileEscrowProcesses(
            directory: folder,
            environment: base.merging(["PROFILE_ESCROW_WEBHOOK_SECRET": secret]) { $1 }
        )
        defer { processes.killAll() }
        let process = try processes.start(
            "serve",
            [
                "serve", "--port", "\(port)", "--rate-limit", "100000", "--rate-burst", "100000", "--backend", stub.url,
                "--concurrency", "4", "--poll-interval", "50ms", "--backoff-base", "50ms",
            ]
        )
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        defer { _ = http.shutdown() }
        let url = "http://127.0.0.1:\(port)"
        try await waitUntilHealthy(http, port: port)

        let acknowledged = NIOLockedValueBox<[String]>([])
        let segments = NIOLockedValueBox<[String]>([])
        let failures = NIOLockedValueBox<[String]>([])
        let nextUser = NIOLockedValueBox(0)
        let cuts = 6
        try await withThrowingTaskGroup(of: Void.self) { group in
            let done = NIOLockedValueBox(false)
            for _ in 0..<4 {
                group.addTask {
                    while !done.withLockedValue({ $0 }) {
                        let user = nextUser.withLockedValue { value -> Int in
                            value += 1
                            return value
                        }
                        var request = HTTPClientRequest(url: url + "/v1/escrows")
                        request.method = .POST
                        request.headers.add(name: "Authorization", value: "Bearer \(bearer)")
                        request.headers.add(name: "Content-Type", value: "application/json")
                        request.body = .bytes(ByteBuffer(string: CLITests.body(user)))
                        let response = try await http.execute(request, timeout: .seconds(30))
                        let body = try await response.body.collect(upTo: 1 << 16)
                        guard response.status == .created,
                            let json = try JSONSerialization.jsonObject(with: Data(body.readableBytesView))
                                as? [String: Any],
                            let id = json["escrowId"] as? String
                        else {
                            failures.withLockedValue { $0.append("capture answered \(response.status.code)") }
                            continue
                        }
                        acknowledged.withLockedValue { $0.append(id) }
                    }
                }
            }
            group.addTask {
                defer { done.withLockedValue { $0 = true } }
                for cut in 0..<cuts {
                    // Each cut after some captures were confirmed and purged (bounded: never a fixed sleep).
                    let target = (cut + 1) * 15
                    try await eventually("\(target) captures", within: 60) {
                        acknowledged.withLockedValue { $0.count } >= target
                    }
                    let path = self.folder + "/segment-\(cut).jsonl"
                    let result = try await run(["audit", "archive", "--before", "0s", "--out", path])
                    if result.status != 0 {
                        failures.withLockedValue { $0.append("archive exited \(result.status): \(result.stderr)") }
                    }
                    if FileManager.default.fileExists(atPath: path) { segments.withLockedValue { $0.append(path) } }
                }
            }
            try await group.waitForAll()
        }
        kill(process.processIdentifier, SIGTERM)
        try await eventually("serve to stop", within: 60) { !process.isRunning }
        #expect(failures.withLockedValue { $0 }.isEmpty, "\(failures.withLockedValue { $0 }.prefix(3))")
        let written = segments.withLockedValue { $0 }
        #expect(!written.isEmpty, "at least one cut took events")

        var archived: [String: [AuditEventType]] = [:]
        let verification = try await AuditArchiveVerification.verify(paths: written, store: harness.store) { event in
            archived[event.draft.escrowID ?? "", default: []].append(event.draft.type)
        }
        #expect(verification.isIntact, "\(verification.problems)")
        #expect(verification.storeChain?.verified == true)
        let delivered = archived.values.filter { $0 == [.captured, .purged] }.count
        #expect(delivered > 0, "escrows delivered and purged were archived: \(archived.values.prefix(3))")
        for id in acknowledged.withLockedValue({ $0 }) {
            let stored = try await harness.store.auditEvents(escrowID: id, limit: 100).map(\.draft.type)
            let inSegments = archived[id] ?? []
            #expect(
                (stored + inSegments).filter { $0 == .captured }.count == 1,
                "an acknowledged capture's event is in exactly one place"
            )
            if let escrowID = EscrowID(hex: id), try await harness.store.record(id: escrowID) != nil {
                #expect(inSegments.isEmpty, "no event of an escrow still held is archived")
            }
        }
    }
}
