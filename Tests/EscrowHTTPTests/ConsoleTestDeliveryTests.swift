import EscrowCrypto
import EscrowTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import ProfileEscrow
import Testing

@testable import EscrowHTTP

/// The console's "Send a test delivery": an operator's form with the session's CSRF token, through the same operator
/// action as `POST /v1/admin/test-delivery`, its status, time and outcome on a page.
@Suite("/console: test delivery")
struct ConsoleTestDeliveryTests {
    typealias Browser = ConsoleTests.Browser

    func send(csrf: String, _ browser: Browser, _ client: some TestClientProtocol) async throws -> TestResponse {
        let response = try await client.execute(
            uri: "/console/deliveries/test",
            method: .post,
            headers: browser.headers(form: true),
            body: Browser.form([("csrf", csrf)])
        )
        return try await browser.follow(response, client)
    }

    @Test("an operator sends one signed test request and reads its answer; a viewer and a forged token send nothing")
    func sentAndShown() async throws {
        let secret = WebhookSecret.generateText()
        let backend = try await FakeBackend.start(secret: secret)
        defer { Task { await backend.stop() } }
        backend.respond { _, _ in .status(204) }
        let harness = try await TestDeliveryTests.harness(backend, secret: secret)
        try await harness.app().test(.live) { client async throws in
            let (viewer, viewerHome) = try await ConsoleTests.signIn("read", harness, client)
            #expect(!viewerHome.text.contains(#"id="test-delivery""#), "no button for a viewer")
            let refused = try await send(csrf: try #require(Browser.csrf(viewerHome)), viewer, client)
            #expect(refused.status == .forbidden)

            let (operator_, home) = try await ConsoleTests.signIn("all", harness, client)
            #expect(home.text.contains(#"id="test-delivery""#))
            let forged = try await send(csrf: "forged", operator_, client)
            #expect(forged.status == .forbidden)
            #expect(backend.requests.isEmpty, "refused forms send nothing")

            let page = try await send(csrf: try #require(Browser.csrf(home)), operator_, client)
            #expect(page.status == .ok)
            #expect(page.text.contains(#"id="test-delivery-result">The backend answered 204 in "#))
            #expect(
                page.text.contains(#"id="test-outcome"><div class="label">Outcome</div><div class="value">confirmed"#)
            )
        }
        let request = try #require(backend.requests.first)
        #expect(backend.requests.count == 1 && request.signatureValid)
        #expect(request.webhookID?.hasPrefix("test-") == true)
    }
}
