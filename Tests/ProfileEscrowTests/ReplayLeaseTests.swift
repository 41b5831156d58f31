import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import Logging
import ServiceLifecycle
import Testing

@testable import ProfileEscrow

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
            try await fixture.claim(owner: "stalled", limit: 1, lease: 0.05).first
        )
        fixture.advance(by: 0.1)  // past the lease
        // Another worker takes it over and delivers it (202: it stays in the store).
        #expect(try await fixture.worker(id: "w2").runOnce().accepted == 1)
        let current = try #require(try await fixture.store.record(id: id))
        let eventsBefore = try await fixture.allEvents().count

        // The stalled worker wakes up: its late outcomes, committed with its old fencing token, change
        // nothing, whatever they are (the store's compare-and-set on the revision refuses them).
        for outcome: DeliveryOutcome in [
            .confirmed(status: 200), .rejected(status: 410), .retry(status: 503, retryAfter: nil),
        ] {
            #expect(await stalled.commit(outcome, for: lease, metadata: [:]) == .stale)
        }
        // Nor does it send anything: its copy of the lease says the lease ran out (the lease-time
        // check, not fencing, stops this one; see the next test for a worker that believes it still
        // holds the lease).
        try await BackendClient.with(stalled.configuration) { backend in
            await stalled.deliver(lease, backend: backend, run: nil)
        }
        #expect(try await fixture.store.record(id: id) == current)
        #expect(try await fixture.allEvents().count == eventsBefore)
        #expect(fixture.requests(id).count == 1)
        #expect(fixture.harness.loggedText().contains("stale lease"))
    }

    /// A worker whose lease was taken over but that still believes it holds it (its copy says a
    /// minute is left: a paused process, a clock that jumped) gets as far as sending; the backend
    /// sees the same Idempotency-Key again. Its confirmation is then committed with its old fencing
    /// token and changes nothing: fencing, not the lease-time check, protects the escrow here.
    @Test func aWorkerThatStillBelievesItHoldsATakenOverLeaseIsFencedOff() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, count in .status(count == 0 ? 202 : 200) }
        let id = try #require(try await fixture.capture(0..<1).first)
        let stalled = try fixture.worker(id: "stalled")
        var lease = try #require(
            try await fixture.claim(owner: "stalled", limit: 1, lease: 0.05).first
        )
        fixture.advance(by: 0.1)  // past the lease
        #expect(try await fixture.worker(id: "w2").runOnce().accepted == 1)
        let current = try #require(try await fixture.store.record(id: id))
        #expect(current.revision > lease.revision)
        let eventsBefore = try await fixture.allEvents().count

        lease.phase = .leased(Lease(owner: "stalled", expiresAt: Date().addingTimeInterval(60)))
        try await BackendClient.with(stalled.configuration) { backend in
            await stalled.deliver(lease, backend: backend, run: nil)
        }
        let requests = fixture.requests(id)
        #expect(requests.count == 2, "it did send: only the store can tell that the lease was lost")
        #expect(Set(requests.compactMap(\.idempotencyKey)) == [id.hex])
        #expect(fixture.stub.answered.map(\.status) == [202, 200])
        // The backend's 200 to the stale worker purges nothing and records nothing.
        #expect(try await fixture.store.record(id: id) == current)
        #expect(try await fixture.allEvents().count == eventsBefore)
        #expect(fixture.harness.loggedText().contains("stale lease"))
        fixture.expectClean()
    }

    /// Whether to send, and how long the exchange may take: at least the delivery timeout must be
    /// left of the lease, and the exchange ends a margin before the lease does.
    @Test func theDeliveryDeadlineEndsAMarginBeforeTheLease() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        let worker = try fixture.worker(lease: 60, timeout: 10)
        #expect(worker.configuration.leaseMargin == 1)
        let now = Date()
        #expect(worker.deliveryBudget(leaseEnd: now.addingTimeInterval(60), now: now) == 10)
        #expect(worker.deliveryBudget(leaseEnd: now.addingTimeInterval(11), now: now) == 10)
        #expect(worker.deliveryBudget(leaseEnd: now.addingTimeInterval(10.5), now: now) == 9.5)
        #expect(worker.deliveryBudget(leaseEnd: now.addingTimeInterval(10), now: now) == 9)
        #expect(worker.deliveryBudget(leaseEnd: now.addingTimeInterval(9.99), now: now) == nil)
        #expect(worker.deliveryBudget(leaseEnd: now.addingTimeInterval(-1), now: now) == nil)
        let long = try fixture.worker(lease: 600, timeout: 120)
        #expect(long.configuration.leaseMargin == 5, "at most 5 s")
    }

    /// End to end: a lease only just longer than the delivery timeout cuts the exchange short, so
    /// that it ends (and its outcome is recorded) a margin before the lease does.
    @Test func aDeliveryOnAShortLeaseEndsAMarginBeforeIt() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .delayed(60, .status(200)) }
        let id = try #require(try await fixture.capture(0..<1).first)
        let worker = try fixture.worker(lease: 60, timeout: 40)
        let margin = worker.configuration.leaseMargin  // 4 s
        // 1.5 s more than the delivery timeout: enough for the delivery to start on a machine running the whole suite
        // in parallel (with less than the timeout left it is not sent; 0.6 s was too little once), little enough that
        // a deadline of now + 40 s would end only about 1.5 s before the lease. The deadline of leaseEnd - 4 s ends it
        // about 4 s before. The check leaves 1.5 s of that for the machine's lag, so the two stay apart; the
        // arithmetic itself is checked exactly above. (Real time: about 37 s.)
        let lease = try #require(
            try await fixture.claim(owner: "w1", limit: 1, lease: 41.5).first
        )
        let leaseEnd = try #require(lease.leaseExpiresAt)
        // When the delivery, its outcome committed, returned (not when the HTTP client shut down after it).
        let ended = try await BackendClient.with(worker.configuration) { backend in
            await worker.deliver(lease, backend: backend, run: nil)
            return Date()
        }
        #expect(fixture.requests(id).count == 1)
        let before = leaseEnd.timeIntervalSince(ended)
        #expect(ended <= leaseEnd.addingTimeInterval(-margin + 1.5), "ended \(before)s before the lease")
        let record = try #require(try await fixture.store.record(id: id))
        #expect(record.state == .pending && record.attempts == 1 && record.lastStatus == nil)
        #expect(try await fixture.events(id).last?.detail == "retry")
    }

    @Test func aLeaseTooShortForTheDeliveryTimeoutIsGivenBackUnattempted() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        let id = try #require(try await fixture.capture(0..<1).first)
        let worker = try fixture.worker(lease: 5, timeout: 2)
        // Leased with less time left than a delivery may take: it must not be sent.
        let lease = try #require(
            try await fixture.claim(owner: "w1", limit: 1, lease: 1).first
        )
        try await BackendClient.with(worker.configuration) { backend in
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
            let purges = mine.filter { $0.type == .purged }
            #expect(purges.map(\.detail) == ["confirmed"])
            #expect(purges.allSatisfy { [200, 409].contains($0.httpStatus ?? 0) }, "with the confirming status")
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
        // The lease must also leave a margin to record the outcome in: 10% of the timeout (max 5 s).
        #expect(code { _ = try fixture.worker(lease: 2.1, timeout: 2) } == .invalidConfiguration)
        #expect(code { _ = try fixture.worker(lease: 2.25, timeout: 2) } == nil)
        #expect(code { _ = try fixture.worker(lease: 104, timeout: 100) } == .invalidConfiguration)
        #expect(code { _ = try fixture.worker(lease: 105, timeout: 100) } == nil)
        do {
            _ = try fixture.worker(lease: 30, timeout: 30)
            Issue.record("a lease as long as the delivery timeout was accepted")
        } catch let error as EscrowError {
            #expect(error.message.contains("at least the delivery timeout (30s) plus a margin of 3s"), "\(error)")
        }
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

    @Test(arguments: [
        "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:49:37 CET",
        "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT",
        "Sun, 06 Nov +994 08:49:37 GMT", "Sunday, 06-Nov-1994 08:49:37 GMT", "Sun Nov  6 08:49:37 94",
        "06 Nov 1994 08:49:37 GMT",
    ])
    func retryAfterRefusesWhatIsNotAnHTTPDate(value: String) {
        #expect(RetryAfter.seconds(value, now: Date(timeIntervalSince1970: 0)) == nil)
    }

    @Test func retryAfterKnowsLeapYearsAndTwoDigitYears() {
        let now = Date(timeIntervalSince1970: 951_782_400)  // 2000-02-29T00:00:00Z
        #expect(RetryAfter.seconds("Tue, 29 Feb 2000 00:01:00 GMT", now: now) == 60)
        #expect(RetryAfter.seconds("Tuesday, 29-Feb-00 00:01:00 GMT", now: now) == 60, "00 is 2000, not 1900")
        let lastSecondOf9999 = Date(timeIntervalSince1970: 253_402_300_799)
        #expect(
            RetryAfter.seconds("Fri, 31 Dec 9999 23:59:59 GMT", now: now) == lastSecondOf9999.timeIntervalSince(now)
        )
    }
}
