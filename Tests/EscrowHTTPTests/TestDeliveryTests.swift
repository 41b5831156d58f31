import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import ProfileEscrow
import Testing

@testable import EscrowHTTP

/// `POST /v1/admin/test-delivery` over loopback against a real backend on 127.0.0.1: signed like a real delivery,
/// marked as a test, no escrow touched.
@Suite("Delivery controls: test delivery")
struct TestDeliveryTests {
    /// A harness whose admin API delivers to `backend` with `secret`, with a delivery timeout of `timeout` seconds.
    static func harness(_ backend: FakeBackend, secret: String, timeout: Double = 5) async throws -> HTTPHarness {
        var harness = try await HTTPHarness()
        var worker = try ReplayWorker.Configuration(backendURL: backend.url, webhookSecret: secret)
        worker.deliveryTimeout = timeout
        harness.dependencies.backend = worker
        return harness
    }

    /// `POST /v1/admin/test-delivery` with the harness' token of `scope`.
    static func test(
        _ harness: HTTPHarness,
        _ scope: String,
        _ client: some TestClientProtocol
    ) async throws
        -> TestResponse
    {
        try await client.execute(uri: "/v1/admin/test-delivery", method: .post, headers: harness.headers(scope))
    }

    @Test("a signed test request with no profile in it; the backend's status, timing and outcome answered")
    func signedAndAnswered() async throws {
        let secret = WebhookSecret.generateText()
        let backend = try await FakeBackend.start(secret: secret)
        defer { Task { await backend.stop() } }
        backend.respond { _, _ in .status(200) }
        let harness = try await Self.harness(backend, secret: secret)
        try await harness.app().test(.live) { client async throws in
            let refused = try await Self.test(harness, "read", client)
            #expect(refused.status == .forbidden)
            #expect(backend.requests.isEmpty)

            let answer = try await Self.test(harness, "operate", client)
            #expect(answer.status == .ok)
            #expect(answer.json["status"] as? Int == 200)
            #expect(answer.json["outcome"] as? String == "confirmed")
            #expect(answer.json["error"] is NSNull)
            let milliseconds = try #require(answer.json["milliseconds"] as? Double)
            #expect(milliseconds >= 0 && milliseconds < 5_000)
        }
        let request = try #require(backend.requests.first)
        #expect(backend.requests.count == 1)
        #expect(request.signatureValid, "signed with the webhook secret as a real delivery is")
        let id = try #require(request.webhookID)
        #expect(id.hasPrefix("test-"))
        #expect(request.idempotencyKey == id)
        let body = try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
        #expect(body["type"] as? String == "test-delivery")
        #expect(Set(body.keys) == ["type", "webhookId", "sentAt"], "no escrow and no profile field")
        let live = try await harness.store.summary(at: harness.clock.now()).live
        #expect(live.values.reduce(0, +) == 0, "no escrow made or touched")
    }

    @Test("a backend that is down or too slow: no status, the error classified")
    func downOrSlow() async throws {
        let secret = WebhookSecret.generateText()
        let slow = try await FakeBackend.start(secret: secret)
        slow.respond { _, _ in .delayed(2, .status(200)) }
        let slowHarness = try await Self.harness(slow, secret: secret, timeout: 0.3)
        try await slowHarness.app().test(.live) { client async throws in
            let answer = try await Self.test(slowHarness, "operate", client)
            #expect(answer.status == .ok)
            #expect(answer.json["status"] is NSNull)
            #expect(answer.json["outcome"] as? String == "retry")
            #expect(answer.json["error"] as? String == "timeout")
        }
        await slow.stop()

        let down = try await FakeBackend.start(secret: secret)
        await down.stop()
        let downHarness = try await Self.harness(down, secret: secret)
        try await downHarness.app().test(.live) { client async throws in
            let answer = try await Self.test(downHarness, "operate", client)
            #expect(answer.status == .ok)
            #expect(answer.json["status"] is NSNull)
            #expect(answer.json["error"] as? String == "connection_refused")
        }
    }

    @Test("a node without a backend answers 409 no_backend")
    func noBackend() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.live) { client async throws in
            let answer = try await Self.test(harness, "operate", client)
            #expect(answer.status == .conflict)
            #expect(answer.json["code"] as? String == "no_backend")
        }
    }

    @Test("replay --test exits 0 when the backend answered 2xx, 1 otherwise, and prints status, time and outcome")
    func cli() async throws {
        let secret = WebhookSecret.generateText()
        let backend = try await FakeBackend.start(secret: secret)
        defer { Task { await backend.stop() } }
        let harness = try await HTTPHarness()
        let folder = harness.directory.path
        try harness.keyring.write(path: folder + "/keyring", overwrite: false)
        func run() async throws -> ProfileEscrowCLI.Result {
            try await ProfileEscrowCLI.run(
                ["replay", "--test"],
                environment: [
                    "PROFILE_ESCROW_DATABASE": harness.databasePath, "PROFILE_ESCROW_KEYRING": folder + "/keyring",
                    "PROFILE_ESCROW_BACKEND_URL": backend.url, "PROFILE_ESCROW_WEBHOOK_SECRET": secret,
                ],
                in: folder
            )
        }
        backend.respond { _, _ in .status(204) }
        let answered = try await run()
        #expect(answered.status == 0, "\(answered.stderr)")
        #expect(answered.stdout.contains("test delivery: status 204"))
        #expect(answered.stdout.contains("outcome confirmed"))

        backend.respond { _, _ in .status(503) }
        let failing = try await run()
        #expect(failing.status == 1)
        #expect(failing.stdout.contains("status 503"))
        #expect(failing.stdout.contains("outcome retry"))
        #expect(backend.requests.allSatisfy { $0.signatureValid && $0.webhookID?.hasPrefix("test-") == true })

        await backend.stop()
        let down = try await run()
        #expect(down.status == 1)
        #expect(down.stdout.contains("no answer (connection_refused)"))
    }
}
