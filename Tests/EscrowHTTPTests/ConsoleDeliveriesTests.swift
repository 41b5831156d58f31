import EscrowCore
import EscrowSQLite
import EscrowTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import EscrowHTTP

/// The overview's delivery switch: shown to a viewer, flipped by an operator through a form with a reason and the
/// session's CSRF token, audited as `console:<token name>`.
@Suite("/console: pause and resume deliveries")
struct ConsoleDeliveriesTests {
    typealias Browser = ConsoleTests.Browser

    func post(
        _ path: String,
        csrf: String,
        reason: String,
        _ browser: Browser,
        _ client: some TestClientProtocol
    ) async throws -> TestResponse {
        let response = try await client.execute(
            uri: path,
            method: .post,
            headers: browser.headers(form: true),
            body: Browser.form([("csrf", csrf), ("reason", reason)])
        )
        return try await browser.follow(response, client)
    }

    @Test("a viewer sees the switch; an operator pauses and resumes with a reason, CSRF-checked and audited")
    func pauseAndResume() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            let (viewer, viewerHome) = try await ConsoleTests.signIn("read", harness, client)
            #expect(viewerHome.text.contains(#"id="deliveries-state">Running<"#))
            #expect(viewerHome.text.contains(#"id="expiring-while-paused">0 escrows expire within 24 hours"#))
            #expect(!viewerHome.text.contains("pause-deliveries"), "no form for a viewer")
            let viewerCSRF = try #require(Browser.csrf(viewerHome))
            let refused = try await post(
                "/console/deliveries/pause",
                csrf: viewerCSRF,
                reason: "OPS-1",
                viewer,
                client
            )
            #expect(refused.status == .forbidden, "a viewer may not pause")

            let (operator_, home) = try await ConsoleTests.signIn("all", harness, client)
            #expect(home.text.contains(#"action="/console/deliveries/pause""#))
            let csrf = try #require(Browser.csrf(home))
            let forged = try await post("/console/deliveries/pause", csrf: "forged", reason: "OPS-1", operator_, client)
            #expect(forged.status == .forbidden)
            let blank = try await post("/console/deliveries/pause", csrf: csrf, reason: " ", operator_, client)
            #expect(blank.status == .badRequest)
            #expect(try await harness.store.deliveryControl() == .running, "refused forms change nothing")

            let paused = try await post(
                "/console/deliveries/pause",
                csrf: csrf,
                reason: "OPS-2 <b>backend</b> deploy",
                operator_,
                client
            )
            #expect(paused.status == .ok)
            #expect(paused.text.contains("Deliveries paused on every node."))
            let control = try await harness.store.deliveryControl()
            #expect(control.paused)
            #expect(control.changedBy == .console(token: "all"))
            #expect(control.reason == "OPS-2 <b>backend</b> deploy")

            let pausedHome = try await client.execute(uri: "/console/", method: .get, headers: operator_.headers())
            #expect(pausedHome.text.contains("by console:all: OPS-2 &lt;b&gt;backend&lt;/b&gt; deploy"), "escaped")
            #expect(!pausedHome.text.contains("<b>backend"))
            #expect(pausedHome.text.contains(#"id="resume-deliveries""#))
            let again = try await post("/console/deliveries/pause", csrf: csrf, reason: "OPS-2", operator_, client)
            #expect(again.text.contains("already paused"))

            let resumed = try await post(
                "/console/deliveries/resume",
                csrf: csrf,
                reason: "OPS-2 done",
                operator_,
                client
            )
            #expect(resumed.text.contains("Deliveries resumed on every node."))
            #expect(try await harness.store.deliveryControl().paused == false)
        }
        let switches = try await harness.auditEvents().map(\.draft).filter {
            $0.type == .deliveriesPaused || $0.type == .deliveriesResumed
        }
        #expect(switches.map(\.type) == [.deliveriesPaused, .deliveriesResumed])
        #expect(switches.allSatisfy { $0.actor == .console(token: "all") })
        #expect(switches.map(\.reason) == ["OPS-2 <b>backend</b> deploy", "OPS-2 done"])
    }
}
