import EscrowCore
import EscrowSQLite
import EscrowTestSupport
import Foundation
import Logging
import Testing

/// `profile-escrow notifications`, as an operator runs it beside a running service: what the store recorded of
/// Apple's notifications, by type and outcome and the last ones, never a user identifier.
@Suite("CLI: Apple's notifications in view")
struct NotificationsCommandTests {
    @Test("counts over the last 24 hours by type and outcome, the last events newest first, in text and JSON")
    func countsAndLastEvents() async throws {
        let cli = CLITests()
        await #expect(try cli.run(["keys", "init"]).status == 0)
        let store = try SQLiteEscrowStore(path: cli.database, logger: Logger(label: "t"))
        let now = Date()
        let recorded: [(String, String, Double)] = [
            ("consent-revoked", "applied", -7200), ("account-delete", "applied", -60),
            ("consent-revoked", "duplicate", -30), ("email-disabled", "applied", -2 * 86_400),
        ]
        for (type, outcome, ago) in recorded {
            try await store.recordNotificationEvent(
                NotificationEvent(type: type, outcome: outcome, at: now.addingTimeInterval(ago))
            )
        }

        let json = try await cli.run(["notifications", "--format", "json", "--last", "2"])
        #expect(json.status == 0, "\(json.stderr)")
        let view = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let counts = try #require(view["last24h"] as? [String: [String: Int]])
        #expect(counts == ["consent-revoked": ["applied": 1, "duplicate": 1], "account-delete": ["applied": 1]])
        let events = try #require(view["events"] as? [[String: String]])
        #expect(events.map { $0["type"] } == ["consent-revoked", "account-delete"], "the newest first, two")
        #expect(events.first?["outcome"] == "duplicate")

        let text = try await cli.run(["notifications"])
        #expect(text.status == 0)
        #expect(text.stdout.contains("consent-revoked: 1 applied, 1 duplicate"), "\(text.stdout)")
        #expect(text.stdout.contains("last 4:"), "a week of events listed: \(text.stdout)")
        await #expect(try cli.run(["notifications", "--last", "101"]).status == 2, "past the list's limit")
    }
}
