import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import GRDB
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

    func cli(_ arguments: [String], database: String? = nil) throws -> ProfileEscrowCLI.Result {
        try ProfileEscrowCLI.run(
            arguments,
            environment: ["PROFILE_ESCROW_DATABASE": database ?? harness.databasePath],
            in: folder
        )
    }

    /// Without a store: `audit verify` on the segments alone.
    func verifyAlone(_ segments: [String]) throws -> ProfileEscrowCLI.Result {
        try ProfileEscrowCLI.run(["audit", "verify"] + segments, in: folder)
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

    func reportJSON(_ arguments: [String]) throws -> [String: Any] {
        let result = try cli(["purge-report", "--format", "json"] + arguments)
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    /// Two cuts, then every kind of damage to the segments is named; the report counts archived periods from the
    /// segments and says which period it cannot cover without them.
    @Test func archiveVerifyAndNameEveryTampering() async throws {
        try await capture(0..<10)
        try await confirm(0..<10)
        try await capture(10..<15)
        let before = try reportJSON([])
        #expect(before["captured"] as? Int == 15)

        let segment1 = folder + "/audit-1.jsonl"
        let first = try cli(["audit", "archive", "--before", later, "--out", segment1])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("archived 30 events (sequences 1-30)"), "\(first.stdout)")
        #expect(first.stdout.contains("escrow still in the store"), "stopped by user 10, live")
        // Nothing more can go while user 10 is live: no file.
        let nothing = try cli(["audit", "archive", "--before", later, "--out", folder + "/none.jsonl"])
        #expect(nothing.status == 0 && nothing.stdout.contains("nothing to archive"), "\(nothing.stdout)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/none.jsonl"))
        // A segment is never overwritten.
        #expect(try cli(["audit", "archive", "--before", later, "--out", segment1]).status == 2)

        try await confirm(10..<15)
        try await capture(15..<18)
        let segment2 = folder + "/audit-2.jsonl"
        let second = try cli(["audit", "archive", "--before", later, "--out", segment2, "--redact-prefixes"])
        #expect(second.status == 0, "\(second.stderr)")
        let redacted = ProfileEscrowCLI.text(atPath: segment2)
        #expect(redacted.contains("\"prefix_commitment\":\"") && !redacted.contains("\"prefix\":\""))
        #expect(ProfileEscrowCLI.text(atPath: segment1).contains("\"prefix\":\""), "the first cut kept prefixes")
        for token in Fake.tokens {
            #expect(!redacted.contains(token) && !ProfileEscrowCLI.text(atPath: segment1).contains(token))
        }

        // Whole history: segments alone, then chained into the store's checkpoint and the store's chain.
        let alone = try verifyAlone([segment1, segment2])
        #expect(alone.status == 0, "\(alone.stdout)\(alone.stderr)")
        let whole = try cli(["audit", "verify", segment1, segment2, "--database", harness.databasePath])
        #expect(whole.status == 0, "\(whole.stdout)\(whole.stderr)")
        #expect(whole.stdout.contains("chain into the store's checkpoint"), "\(whole.stdout)")
        #expect(whole.stdout.contains("store chain: verified"), "\(whole.stdout)")

        // Reordered segments, a dropped first or last segment.
        let reordered = try verifyAlone([segment2, segment1])
        #expect(
            reordered.status == 1 && reordered.stdout.contains("audit-2.jsonl: given out of order"),
            "\(reordered.stdout)"
        )
        let droppedFirst = try cli(["audit", "verify", segment2, "--database", harness.databasePath])
        #expect(droppedFirst.status == 1, "\(droppedFirst.stdout)")
        #expect(
            droppedFirst.stdout.contains("cut of sequences 1-30 is in none of the segments given"),
            "\(droppedFirst.stdout)"
        )
        let droppedLast = try cli(["audit", "verify", segment1, "--database", harness.databasePath])
        #expect(droppedLast.status == 1 && droppedLast.stdout.contains("are missing"), "\(droppedLast.stdout)")
        #expect(try verifyAlone([segment1, segment1]).status == 1, "a segment given twice overlaps")

        // Damage inside a segment: each named by file, line and sequence.
        let purgedLine = try #require(lines(segment1).firstIndex { $0.contains("\"type\":\"purged\"") })
        let altered = try tampered(segment1, "altered.jsonl") {
            $0[purgedLine] = $0[purgedLine].replacingOccurrences(
                of: "\"detail\":\"confirmed\"",
                with: "\"detail\":\"expired\""
            )
        }
        let alteredResult = try verifyAlone([altered, segment2])
        #expect(alteredResult.status == 1)
        #expect(
            alteredResult.stdout.contains(
                "altered.jsonl: line \(purgedLine + 1) (sequence \(purgedLine)): its content does not match"
            ),
            "\(alteredResult.stdout)"
        )
        let dropped = try tampered(segment1, "dropped.jsonl") { $0.remove(at: 5) }
        let droppedResult = try verifyAlone([dropped])
        #expect(droppedResult.status == 1)
        #expect(
            droppedResult.stdout.contains(
                "dropped.jsonl: line 6 (sequence 6): sequence 5 was expected after 4: events 5-5 dropped or moved"
            ),
            "\(droppedResult.stdout)"
        )
        let swapped = try tampered(segment1, "swapped.jsonl") { $0.swapAt(3, 4) }
        let swappedResult = try verifyAlone([swapped])
        #expect(swappedResult.status == 1)
        #expect(swappedResult.stdout.contains("swapped.jsonl: line 4 (sequence 4)"), "\(swappedResult.stdout)")
        let truncated = try tampered(segment1, "truncated.jsonl") { $0.removeLast(4) }
        #expect(try verifyAlone([truncated]).stdout.contains("no trailer after line"))
        let header = try tampered(segment1, "header.jsonl") {
            $0[0] = $0[0].replacingOccurrences(of: "\"prefixes\":\"kept\"", with: "\"prefixes\":\"redacted\"")
        }
        #expect(try verifyAlone([header]).stdout.contains("the file hash does not match"))
        #expect(try verifyAlone(["/nonexistent/segment.jsonl"]).status == 2)

        // The store's chain starts at the checkpoint; the report says so.
        let verified = try reportJSON(["--verify"])
        let chain = try #require(verified["chain"] as? [String: Any])
        #expect(chain["verified"] as? Bool == true)
        #expect((chain["fromSequence"] as? Int ?? 0) > 31)
        // A period reaching before the checkpoint: named as not covered without segments, counted with them.
        let text = try cli(["purge-report", "--since", "30d"])
        #expect(text.stdout.contains("NOT COVERED"), "\(text.stdout)")
        let uncovered = try #require(try reportJSON(["--since", "30d"])["archive"] as? [String: Any])
        #expect(uncovered["uncoveredFromSequence"] as? Int == 1)
        let covered = try reportJSON(["--since", "30d", "--verify", "--archive", segment1, segment2])
        #expect(covered["captured"] as? Int == 18)
        #expect((covered["purged"] as? [String: Int])?["confirmed"] == 15)
        #expect((covered["archive"] as? [String: Any])?["uncoveredFromSequence"] is NSNull)
        #expect((covered["chain"] as? [String: Any])?["verified"] as? Bool == true)
        let broken = try cli(["purge-report", "--verify", "--archive", altered, segment2])
        #expect(broken.status == 1 && broken.stdout.contains("its content does not match"), "\(broken.stdout)")
        // A period after the checkpoint needs no segment.
        let recent = try reportJSON(["--since", Timestamp.seconds(Date().addingTimeInterval(1800))])
        #expect((recent["archive"] as? [String: Any])?["uncoveredFromSequence"] is NSNull)
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
        #expect(try cli(["audit", "archive", "--before", later, "--out", segment]).status == 0)
        let restored = try cli(["audit", "verify", segment, "--database", backup], database: backup)
        #expect(restored.status == 0, "\(restored.stdout)\(restored.stderr)")
        #expect(restored.stdout.contains("restored from a backup"), "\(restored.stdout)")
        let report = try cli(["purge-report", "--verify"], database: backup)
        #expect(report.status == 0, "\(report.stdout)")
    }
}
