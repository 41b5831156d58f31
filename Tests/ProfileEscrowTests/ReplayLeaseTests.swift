import EscrowCore
import EscrowCrypto
import EscrowSQLite
import Foundation
import Logging
@testable import ProfileEscrow
import ServiceLifecycle
import Testing

/// Leases, fencing tokens, several workers and shutdown.
@Suite("Replay worker leases", .serialized)
struct ReplayLeaseTests {
    @Test func aStaleWorkersLateOutcomeChangesNothing() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .status(202) }
        let id = try #require(try await fixture.capture(0..<1).first)
        // Worker "stalled" leases the escrow, then stalls past its lease.
        let stalled = try fixture.worker(id: "stalled")
        let lease = try #require(
            try await fixture.store.claimDue(at: Date(), limit: 1, owner: "stalled", leaseDuration: 0.05).first
        )
        try await Task.sleep(for: .milliseconds(100))
        // Another worker takes it over and delivers it (202: it stays in the store).
        #expect(try await fixture.worker(id: "w2").runOnce().accepted == 1)
        let current = try #require(try await fixture.store.record(id: id))
        let eventsBefore = try await fixture.allEvents().count

        // The stalled worker wakes up: its late outcomes change nothing, whatever they are.
        for outcome: DeliveryOutcome in [
            .confirmed(status: 200), .rejected(status: 410), .retry(status: 503, retryAfter: nil),
        ] {
            #expect(await stalled.commit(outcome, for: lease, metadata: [:]) == .stale)
        }
        // Nor does it send anything with the lease it lost.
        try await BackendClient.with(stalled.configuration, logger: Logger(label: "test")) { backend in
            await stalled.deliver(lease, backend: backend, run: nil)
        }
        #expect(try await fixture.store.record(id: id) == current)
        #expect(try await fixture.allEvents().count == eventsBefore)
        #expect(fixture.requests(id).count == 1)
        #expect(fixture.harness.loggedText().contains("stale lease"))
    }

    @Test func aLeaseTooShortForTheDeliveryTimeoutIsGivenBackUnattempted() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        let id = try #require(try await fixture.capture(0..<1).first)
        let worker = try fixture.worker(lease: 5, timeout: 2)
        // Leased with less time left than a delivery may take: it must not be sent.
        let lease = try #require(
            try await fixture.store.claimDue(at: Date(), limit: 1, owner: "w1", leaseDuration: 1).first
        )
        try await BackendClient.with(worker.configuration, logger: Logger(label: "test")) { backend in
            await worker.deliver(lease, backend: backend, run: nil)
        }
        #expect(fixture.stub.requests.isEmpty)
        let released = try #require(try await fixture.store.record(id: id))
        #expect(released.state == .pending && released.attempts == 0 && released.leaseOwner == nil)
    }

    @Test func twoWorkersNeverDeliverOneEscrowAtOnceAndEveryEscrowIsConfirmedOnce() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        // Slow-ish and sometimes failing, so the workers overlap and retry.
        fixture.stub.respond { request, count in
            let roll = abs((request.idempotencyKey ?? "").hashValue) % 10
            if count == 0, roll == 0 { return .status(503, headers: ["Retry-After": "0"]) }
            if count == 0, roll == 1 { return .close }
            return .delayed(Double(roll) / 1000, .status(roll == 2 ? 409 : 200))
        }
        let ids = try await fixture.capture(0..<200)
        let workers = [try fixture.worker(id: "w1", concurrency: 4), try fixture.worker(id: "w2", concurrency: 4)]
        let group = ServiceGroup(services: workers, logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        try await eventually("every escrow confirmed", within: 120) {
            try await fixture.store.summary(at: Date()).live.values.reduce(0, +) == 0
        }
        await group.triggerGracefulShutdown()
        try await bounded("shutdown", within: 30) { try await running.value }

        fixture.expectClean()  // includes: no escrow was ever in flight twice at once
        let events = try await fixture.allEvents()
        let confirming = Set(fixture.stub.answered.filter { [200, 409].contains($0.status) }.map(\.key))
        for id in ids {
            let mine = events.filter { $0.escrowID == id.hex }
            #expect(mine.filter { $0.type == .confirmed }.count == 1)
            #expect(mine.filter { $0.type == .purged }.map(\.detail) == ["confirmed"])
            #expect(confirming.contains(id.hex), "purged only after a confirming answer")
            #expect(Set(fixture.requests(id).compactMap(\.idempotencyKey)) == [id.hex])
        }
        let report = try await PurgeReport.build(store: fixture.store, verify: true)
        #expect(report.captured == 200 && report.purged[.confirmed] == 200)
        #expect(report.live.values.allSatisfy { $0 == 0 } && report.overdue == 0 && report.dead.isEmpty)
        #expect(report.chain?.verified == true && !report.hasProblem)
    }

    @Test func gracefulShutdownFinishesDeliveriesInFlightAndLeavesNoLease() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .delayed(0.5, .status(200)) }
        let ids = try await fixture.capture(0..<40)
        let worker = try fixture.worker(concurrency: 4)
        let group = ServiceGroup(services: [worker], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        try await eventually("deliveries in flight") { fixture.stub.requests.count >= 4 }
        await group.triggerGracefulShutdown()
        try await bounded("shutdown", within: 30) { try await running.value }

        let answered = fixture.stub.answered.count
        #expect(answered == fixture.stub.requests.count, "every delivery in flight was finished")
        #expect(try await fixture.store.records(.state(.leased), after: nil, limit: 100).isEmpty)
        var purged = 0
        for id in ids {
            if let record = try await fixture.store.record(id: id) {
                #expect(record.state == .pending && record.attempts == 0 && record.leaseOwner == nil)
            } else {
                purged += 1
            }
        }
        #expect(purged == answered && purged >= 4 && purged < 40)
        fixture.expectClean()
    }

    @Test func configurationIsValidated() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        func code(_ body: () throws -> Void) -> EscrowError.Code? {
            do {
                try body()
                return nil
            } catch let error as EscrowError {
                // The error says what is wrong, never the secret itself.
                #expect(!error.description.contains("notbase64") && !error.description.contains(fixture.secret))
                return error.code
            } catch {
                return nil
            }
        }
        let url = fixture.stub.url
        for secret in ["", "secret", "whsec_", "whsec_!!!notbase64", "whsec_" + Data([1, 2, 3]).base64EncodedString()] {
            #expect(
                code { _ = try ReplayWorker.Configuration(backendURL: url, webhookSecret: secret) }
                    == .invalidConfiguration
            )
        }
        for bad in ["ftp://127.0.0.1/x", "not a url", "http:///register", "https://user:pw@example.invalid/x"] {
            #expect(
                code { _ = try ReplayWorker.Configuration(backendURL: bad, webhookSecret: fixture.secret) }
                    == .invalidConfiguration
            )
        }
        #expect(code { _ = try fixture.worker(lease: 2, timeout: 2) } == .invalidConfiguration)
        #expect(code { _ = try fixture.worker(concurrency: 0) } == .invalidConfiguration)
        #expect(code { _ = try fixture.worker(id: "no spaces") } == .invalidConfiguration)
        let captureOnly = Escrow(
            store: fixture.store,
            keyring: fixture.harness.keyring.publicOnly(),
            logger: Logger(label: "t")
        )
        #expect(
            code {
                _ = try ReplayWorker(
                    escrow: captureOnly,
                    configuration: try fixture.configuration(),
                    logger: Logger(label: "t")
                )
            } == .captureOnly
        )
        let secret = try WebhookSecret(fixture.secret)
        #expect("\(secret)" == "WebhookSecret(redacted)")
    }

    /// The example of the Standard Webhooks specification.
    @Test func signatureMatchesTheStandardWebhooksExample() throws {
        let secret = try WebhookSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        let body = Array(#"{"test": 2432232314}"#.utf8)
        let header = WebhookSignature.header(
            secret: secret,
            id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
            timestamp: 1_614_265_330,
            body: body
        )
        #expect(header == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        #expect(
            WebhookSignature.verify(
                header: "v1,bm9wZQ== " + header,
                secret: secret,
                id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
                timestamp: 1_614_265_330,
                body: body
            )
        )
        #expect(
            !WebhookSignature.verify(
                header: header,
                secret: secret,
                id: "msg_other",
                timestamp: 1_614_265_330,
                body: body
            )
        )
    }

    @Test(
        arguments: [
            ("120", 120.0), ("0", 0), (" 7 ", 7), ("soon", nil), ("-3", nil), ("", nil),
        ] as [(String, Double?)]
    )
    func retryAfterParsing(value: String, seconds: Double?) {
        #expect(RetryAfter.seconds(value, now: Date()) == seconds)
    }

    @Test func retryAfterDates() {
        let now = Date(timeIntervalSince1970: 784_111_777 - 30)  // 30 s before the RFC example date
        #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:49:37 GMT", now: now) == 30)
        #expect(RetryAfter.seconds("Sunday, 06-Nov-94 08:49:37 GMT", now: now) == 30)
        #expect(RetryAfter.seconds("Sun Nov  6 08:49:37 1994", now: now) == 30)
        #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:49:37 GMT", now: now.addingTimeInterval(100)) == 0, "past: now")
    }
}
