import EscrowCore
import EscrowSQLite
import EscrowTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import EscrowHTTP

/// Apple's notifications in view: each verified one recorded by type and outcome (never its subject) and counted in
/// the admin overview, the console's overview and the console's notifications page.
@Suite("Apple notifications in view")
struct NotificationEventsTests {
    let routes = AppleNotificationTests()

    @Test("verified notifications are counted by type and outcome, listed newest first, never with their subject")
    func countedAndListed() async throws {
        let harness = try await routes.harnessWithEscrow(1)
        let revoked = try await routes.notification("consent-revoked", number: 1)
        for jws in [
            try await routes.notification("email-disabled", number: 2), revoked, revoked,
            try await routes.notification("account-delete", number: 3),
        ] {
            #expect(try await routes.post(harness, jws).status == .ok)
        }
        let events = try await harness.store.notificationEvents(limit: 10)
        #expect(
            events.map { "\($0.type) \($0.outcome)" } == [
                "account-delete not-held", "consent-revoked duplicate", "consent-revoked purged",
                "email-disabled not-held",
            ],
            "\(events)"
        )

        try await harness.app().test(.router) { client async throws in
            let overview = try await client.execute(uri: "/v1/admin/overview", method: .get, headers: harness.headers())
            let window = try #require(overview.json["last24h"] as? [String: Any])
            let counts = try #require(window["appleNotifications"] as? [String: [String: Int]])
            #expect(counts["consent-revoked"] == ["purged": 1, "duplicate": 1], "\(counts)")
            #expect(counts["email-disabled"] == ["not-held": 1])

            let (browser, home) = try await ConsoleTests.signIn("read", harness, client)
            #expect(home.text.contains("Apple notifications, 24 h"))
            #expect(home.text.contains(#"href="/console/notifications""#))
            let page = try await client.execute(uri: "/console/notifications", method: .get, headers: browser.headers())
            #expect(page.status == .ok)
            #expect(page.text.contains("<td>consent-revoked</td><td>duplicate</td><td>1</td>"), "the counts")
            #expect(page.text.contains("<td>account-delete</td><td>not-held</td></tr>"), "the last events")
            for number in 1...3 { #expect(!page.text.contains(Fake.userIdentifier(number)), "never a subject") }
        }
    }
}
