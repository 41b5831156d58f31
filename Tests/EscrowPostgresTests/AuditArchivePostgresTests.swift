import EscrowCore
import EscrowTestSupport
import Foundation
import Testing

/// `audit archive`, `audit verify` and `purge-report --archive` on PostgreSQL, through the real binary.
@Suite("Audit archive on PostgreSQL")
struct AuditArchivePostgresTests {
    static func body(_ number: Int) -> String {
        "{\"userIdentifier\":\"000000.test\(String(format: "%020d", number)).0001\","
            + "\"email\":\"fake\(number)@example.invalid\"}"
    }

    static func user(_ number: Int) -> String { "000000.test\(String(format: "%020d", number)).0001" }

    @Test func archiveVerifyAndReportOverArchivedPeriods() async throws {
        try await TestDatabase.with { database in
            let directory = TemporaryDirectory()
            let environment = [
                "PROFILE_ESCROW_DATABASE": database.url, "PROFILE_ESCROW_KEYRING": directory.path + "/keyring",
            ]
            func cli(_ arguments: [String], stdin: String = "") async throws -> ProfileEscrowCLI.Result {
                try await ProfileEscrowCLI.run(arguments, stdin: stdin, environment: environment, in: directory.path)
            }
            let later = Timestamp.seconds(Date().addingTimeInterval(3600))
            #expect(try await cli(["keys", "init"]).status == 0)
            for number in 0..<6 {
                let capture = try await cli(["capture"], stdin: Self.body(number))
                #expect(capture.status == 0, "\(capture.stderr)")
            }
            for number in 0..<4 { #expect(try await cli(["confirm", Self.user(number)]).status == 0) }
            let segment1 = directory.path + "/audit-1.jsonl"
            let first = try await cli(["audit", "archive", "--before", later, "--out", segment1])
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.stdout.contains("archived 4 events (sequences 1-4)"), "users 0-3's captures: \(first.stdout)")
            for number in 4..<6 { #expect(try await cli(["confirm", Self.user(number)]).status == 0) }
            let segment2 = directory.path + "/audit-2.jsonl"
            let second = try await cli(["audit", "archive", "--before", later, "--out", segment2, "--redact-prefixes"])
            #expect(
                second.status == 0 && second.stdout.contains("stopped by: the end of the chain"),
                "\(second.stdout)"
            )

            let whole = try await cli(["audit", "verify", segment1, segment2, "--database", database.url])
            #expect(whole.status == 0, "\(whole.stdout)\(whole.stderr)")
            #expect(whole.stdout.contains("chain into the store's checkpoint"), "\(whole.stdout)")
            let dropped = try await cli(["audit", "verify", segment2, "--database", database.url])
            #expect(
                dropped.status == 1 && dropped.stdout.contains("in none of the segments given"),
                "\(dropped.stdout)"
            )

            let uncovered = try await cli(["purge-report", "--since", "30d", "--verify"])
            #expect(uncovered.status == 0 && uncovered.stdout.contains("NOT COVERED"), "\(uncovered.stdout)")
            let report = try await cli([
                "purge-report", "--since", "30d", "--verify", "--format", "json", "--archive", segment1, segment2,
            ])
            #expect(report.status == 0, "\(report.stdout)\(report.stderr)")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(report.stdout.utf8)) as? [String: Any])
            #expect(json["captured"] as? Int == 6)
            #expect((json["purged"] as? [String: Int])?["confirmed"] == 6)
            #expect((json["chain"] as? [String: Any])?["verified"] as? Bool == true)
        }
    }
}
