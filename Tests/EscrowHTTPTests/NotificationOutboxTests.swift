import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import Metrics
import NIOConcurrencyHelpers
import ProfileEscrow
import Testing

@testable import EscrowHTTP

extension HTTPHarness {
    /// A forwarder to `backend` over the harness's store, keyring and clock.
    func forwarder(
        to backend: FakeBackend,
        store: (any NotificationOutbox)? = nil,
        keyring: Keyring? = nil,
        factory: (any MetricsFactory)? = nil,
        configure: (inout NotificationForwarder.Configuration) -> Void = { _ in }
    ) throws -> NotificationForwarder {
        var configuration = NotificationForwarder.Configuration(
            url: URL(string: backend.url)!,
            secrets: [try WebhookSecret(backend.secretText)]
        )
        configure(&configuration)
        let keyring = keyring ?? fixture.keyring
        return NotificationForwarder(
            configuration,
            outbox: store ?? fixture.store,
            keyring: { keyring },
            clock: fixture.clock,
            logger: fixture.logger,
            factory: factory ?? MetricsSystem.factory
        )
    }
}

/// The durable outbox behind forwarding: notifications survive a restart, are retried, refused or given up by id,
/// never sent by two forwarders at once, and never stored in clear.
@Suite("Notification outbox: durable, sealed forwarding")
struct NotificationOutboxTests {
    let keys = AppleTestKeys.shared

    /// A backend answering `reply`, and a harness whose notifications are queued for it, with no forwarder running
    /// yet.
    func queueing(
        answering reply: FakeBackend.Reply = .status(204),
        configure: (inout NotificationForwarder.Configuration) -> Void = { _ in }
    ) async throws -> (FakeBackend, HTTPHarness, NotificationForwarder) {
        let backend = try await FakeBackend.start(secret: WebhookSecret.generateText())
        backend.respond { _, _ in reply }
        var harness = try await HTTPHarness(apple: try await keys.verifier())
        let forwarder = try harness.forwarder(to: backend, configure: configure)
        harness.dependencies.notificationForwarder = forwarder
        return (backend, harness, forwarder)
    }

    /// Posts a verified notification of `type` for fake user `number`; returns Apple's JWS.
    @discardableResult
    func notify(
        _ harness: HTTPHarness,
        _ type: String = "consent-revoked",
        number: Int = 1,
        email: String? = nil
    ) async throws -> String {
        let jws = try await keys.sign(
            AppleTestKeys.NotificationClaims(
                jti: UUID().uuidString,
                events: AppleTestKeys.events(
                    type,
                    sub: Fake.userIdentifier(number),
                    email: email,
                    eventTime: Date().addingTimeInterval(1)
                )
            )
        )
        let response = try await harness.app().test(.router) { client async throws in
            try await client.execute(
                uri: "/v1/apple/notifications",
                method: .post,
                headers: [.contentType: "application/json"],
                body: Fake.body(["payload": jws])
            )
        }
        #expect(response.status == .ok)
        return jws
    }

    func running(_ forwarder: NotificationForwarder) -> Task<Void, any Error> {
        Task { try await forwarder.run() }
    }

    func stop(_ task: Task<Void, any Error>) async {
        task.cancel()
        _ = try? await task.value
    }

    @Test("a notification queued before a stop is forwarded by a new forwarder on the reopened store")
    func acrossRestart() async throws {
        let (backend, harness, first) = try await queueing()
        // The first forwarder runs, and stops before the notification arrives: nothing is sent.
        await stop(running(first))
        let jws = try await notify(harness)
        #expect(try await harness.store.outboxCount() == 1, "queued durably before Apple's answer")
        #expect(backend.requests.isEmpty)

        // A restart: the same database file, opened anew, and a forwarder with the same keyring.
        let reopened = try SQLiteEscrowStore(path: harness.fixture.databasePath, logger: harness.fixture.logger)
        let second = try harness.forwarder(to: backend, store: reopened)
        let task = running(second)
        try await eventually("forwarded after the restart", within: 20) { backend.answered.map(\.status) == [204] }
        let request = try #require(backend.requests.first)
        #expect(request.signatureValid)
        #expect(request.webhookID?.hasPrefix("apple-") == true)
        let body = try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
        #expect(body["payload"] as? String == jws, "the body opened as it was sealed")
        try await eventually("deleted once forwarded", within: 10) { try await reopened.outboxCount() == 0 }
        await stop(task)
        await backend.stop()
    }

    @Test("a rejection (4xx) is not retried: deleted and logged by webhook id")
    func rejection() async throws {
        let (backend, harness, forwarder) = try await queueing(answering: .status(422))
        let task = running(forwarder)
        try await notify(harness)
        try await eventually("refused", within: 20) { backend.answered.map(\.status) == [422] }
        try await eventually("deleted", within: 10) { try await harness.store.outboxCount() == 0 }
        // Stopped, the forwarder sends nothing more: what the backend got is all it will ever get.
        await stop(task)
        #expect(backend.requests.count == 1, "not sent again")
        let id = try #require(backend.requests.first?.webhookID)
        #expect(harness.loggedText().contains("refused a forwarded Apple notification"))
        #expect(harness.loggedText().contains(id))
        await backend.stop()
    }

    @Test("given up after the maximum attempts, honoring the backoff; logged by id, never content")
    func givesUp() async throws {
        let (backend, harness, forwarder) = try await queueing(answering: .status(503)) {
            $0.maximumAttempts = 3
            $0.maximumBackoff = 0.3
        }
        let task = running(forwarder)
        try await notify(harness, number: 7)
        try await eventually("three attempts, then deleted", within: 20) {
            let left = try await harness.store.outboxCount()
            return backend.requests.count == 3 && left == 0
        }
        let times = backend.requests.map(\.at)
        #expect(times[1].timeIntervalSince(times[0]) >= 0.25, "after a backoff")
        await stop(task)
        #expect(backend.requests.count == 3, "no attempt past the maximum")
        let logged = harness.loggedText()
        #expect(logged.contains("the backend did not take it"))
        #expect(logged.contains(try #require(backend.requests.first?.webhookID)))
        #expect(!logged.contains(Fake.userIdentifier(7)), "no user identifier logged")
        await backend.stop()
    }

    @Test("several URLs: each gets the notification with the same webhook id, retried on its own; a URL dropped later")
    func severalURLs() async throws {
        let secret = WebhookSecret.generateText()
        let production = try await FakeBackend.start(secret: secret)
        production.respond { _, _ in .status(204) }
        let staging = try await FakeBackend.start(secret: secret)
        let stagingAnswers = NIOLockedValueBox(0)
        // Staging is down for its first two attempts; production takes the notification at once.
        staging.respond { _, _ in
            let answered = stagingAnswers.withLockedValue { count in
                count += 1
                return count
            }
            return answered <= 2 ? .status(503) : .status(204)
        }
        var harness = try await HTTPHarness(apple: try await keys.verifier())
        let forwarder = try harness.forwarder(to: production) {
            $0.urls.append(URL(string: staging.url)!)
            $0.maximumBackoff = 0.3
        }
        harness.dependencies.notificationForwarder = forwarder
        let task = running(forwarder)
        let jws = try await notify(harness)
        try await eventually("production took it", within: 20) { production.answered.map(\.status) == [204] }
        try await eventually("staging took it on its third attempt", within: 20) {
            staging.answered.map(\.status) == [503, 503, 204]
        }
        try await eventually("both entries deleted", within: 10) { try await harness.store.outboxCount() == 0 }
        #expect(production.requests.count == 1, "production's copy was not sent again while staging's was retried")
        let ids = Set((production.requests + staging.requests).compactMap(\.webhookID))
        #expect(ids.count == 1 && ids.first?.hasPrefix("apple-") == true, "one webhook id for every copy: \(ids)")
        for request in production.requests + staging.requests {
            #expect(request.signatureValid)
            let body = try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
            #expect(body["payload"] as? String == jws)
        }
        await stop(task)

        // Staging removed from the configuration while its copy of a second notification waits: that copy is given
        // up (logged by id), production's is sent.
        staging.respond { _, _ in .status(503) }
        let both = try harness.forwarder(to: production) { $0.urls.append(URL(string: staging.url)!) }
        harness.dependencies.notificationForwarder = both
        try await notify(harness, number: 2)
        #expect(try await harness.store.outboxCount() == 2, "one entry a URL, queued with the record")
        let productionOnly = try harness.forwarder(to: production)
        let again = running(productionOnly)
        try await eventually("production took the second", within: 20) { production.answered.count == 2 }
        try await eventually("staging's copy given up", within: 20) { try await harness.store.outboxCount() == 0 }
        #expect(harness.loggedText().contains("its URL is no longer configured"))
        await stop(again)
        await production.stop()
        await staging.stop()
    }

    @Test("two forwarders on one store never send the same notification at once")
    func twoForwarders() async throws {
        // Slow answers: both forwarders claim while the other is still sending.
        let (backend, harness, _) = try await queueing(answering: .delayed(0.05, .status(204)))
        for number in 1...12 { try await notify(harness, number: number) }
        #expect(try await harness.store.outboxCount() == 12)
        let other = try SQLiteEscrowStore(path: harness.fixture.databasePath, logger: harness.fixture.logger)
        let tasks = [
            running(try harness.forwarder(to: backend)), running(try harness.forwarder(to: backend, store: other)),
        ]
        try await eventually("all forwarded and deleted", within: 30) {
            let left = try await harness.store.outboxCount()
            return backend.answered.count >= 12 && left == 0
        }
        for task in tasks { await stop(task) }
        let ids = backend.requests.compactMap(\.webhookID)
        #expect(ids.count == 12, "each sent once: \(ids.count) requests")
        #expect(Set(ids).count == 12)
        await backend.stop()
    }

    @Test("an entry the keyring cannot open is given up and logged by id")
    func unopenable() async throws {
        let (backend, harness, _) = try await queueing()
        try await notify(harness)
        let forwarder = try harness.forwarder(to: backend, keyring: Keyring.generate())
        let task = running(forwarder)
        try await eventually("given up", within: 20) { try await harness.store.outboxCount() == 0 }
        #expect(backend.requests.isEmpty, "nothing sent")
        #expect(harness.loggedText().contains("its sealed body does not open"))
        await stop(task)
        await backend.stop()
    }

    @Test("an entry older than the retention is swept by the retention sweep, even with no forwarder running")
    func retention() async throws {
        let (backend, harness, _) = try await queueing()
        try await notify(harness)
        harness.fixture.clock.advance(by: OutboxEntry.retention - 60)
        try await harness.escrow.sweep()
        #expect(try await harness.store.outboxCount() == 1, "kept within the retention")
        harness.fixture.clock.advance(by: 120)
        try await harness.escrow.sweep()
        #expect(try await harness.store.outboxCount() == 0, "swept past it")
        #expect(harness.loggedText().contains("older than the outbox's retention"))
        await backend.stop()
    }

    @Test("the database never holds a queued notification in clear")
    func sealedAtRest() async throws {
        let (backend, harness, _) = try await queueing()
        let email = "canaryoutbox7@privaterelay.appleid.com"
        let jws = try await notify(harness, "email-enabled", number: 7, email: email)
        #expect(try await harness.store.outboxCount() == 1)
        let files = harness.fixture.storeFiles()
        #expect(!files.isEmpty)
        for (name, bytes) in files {
            for canary in [Fake.userIdentifier(7), email, jws, String(jws.split(separator: ".")[1])] {
                #expect(!bytes.contains(bytes: Array(canary.utf8)), "\(name) holds a canary in clear")
            }
        }
        await backend.stop()
    }

    @Test("sealed to the active key version, bound to its webhook id")
    func sealing() throws {
        let keyring = Keyring.generate()
        let body = Array(#"{"fake":"canary body"}"#.utf8)
        let (version, sealed) = try keyring.sealNotification(body, webhookID: "apple-00")
        #expect(version == keyring.activeVersion)
        #expect(!sealed.contains(bytes: Array("canary body".utf8)))
        #expect(try keyring.openNotification(sealed, keyVersion: version, webhookID: "apple-00") == body)
        #expect(throws: CryptoError.self) {
            try keyring.openNotification(sealed, keyVersion: version, webhookID: "apple-01")
        }
        #expect(throws: CryptoError.self) {
            try keyring.openNotification(sealed, keyVersion: version + 1, webhookID: "apple-00")
        }
        #expect(throws: CryptoError.self) {
            try keyring.publicOnly().openNotification(sealed, keyVersion: version, webhookID: "apple-00")
        }
    }
}
