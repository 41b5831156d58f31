import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import InMemoryLogging
import Logging
import ServiceLifecycle
import Testing

@testable import ProfileEscrow

/// Each delivery outcome (docs/replay.md) against a real HTTP server on loopback (no mocked client).
@Suite("Replay worker outcomes", .serialized)
struct ReplayWorkerTests {
    @Test(arguments: [200, 201, 204, 409])
    func confirmingAnswersPurge(status: Int) async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .status(status) }
        let ids = try await fixture.capture(0..<3)

        let summary = try await fixture.worker().runOnce()

        #expect(summary.delivered == 3 && summary.confirmed == 3 && summary.retried == 0 && summary.dead == 0)
        for (number, id) in ids.enumerated() {
            #expect(try await fixture.store.record(id: id) == nil, "purged")
            #expect(try await fixture.types(id) == ["captured", "purged"])
            let events = try await fixture.events(id)
            #expect(events[1].httpStatus == status && events[1].detail == "confirmed")
            #expect(events[1].actor.rawValue == "worker:w1" && events[1].ageMilliseconds != nil)
            let requests = fixture.requests(id)
            #expect(requests.count == 1)
            let request = try #require(requests.first)
            #expect(request.method == "POST" && request.path == "/register" && request.attempt == 1)
            #expect(request.signatureValid)
            let body = try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
            #expect(body["userIdentifier"] as? String == Fake.userIdentifier(number))
            #expect(body["email"] as? String == "canarymail\(number)@example.invalid")
            #expect(body["verified"] as? Bool == false)
            #expect(body["capturedAt"] is String)
            let timestamp = try #require(request.webhookTimestamp.flatMap(Double.init))
            #expect(abs(timestamp - Date().timeIntervalSince1970) < 300, "webhook-timestamp is unix seconds")
        }
        fixture.expectClean()
        let report = try await PurgeReport.build(store: fixture.store, verify: true)
        #expect(report.purged[.confirmed] == 3 && report.chain?.verified == true && !report.hasProblem)
    }

    /// During a secret rotation every delivery carries one signature per configured secret: a backend that
    /// knows only the old secret, or only the new one, verifies it; one that knows neither answers 401, which
    /// is retried (nothing dies).
    @Test func aSecretRotationLosesNoDelivery() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { request, _ in .status(request.signatureValid ? 200 : 401) }
        let new = WebhookSecret.generateText()
        let ids = try await fixture.capture(0..<2)
        var configuration = try fixture.configuration()
        configuration.webhookSecrets = try WebhookSecret.list("\(new) \(fixture.secret)")
        let worker = try ReplayWorker(escrow: fixture.escrow, configuration: configuration, logger: Logger(label: "t"))
        let summary = try await worker.runOnce()
        #expect(summary.confirmed == 2)
        let request = try #require(fixture.requests(ids[0]).first)
        let entries = try #require(request.webhookSignature).split(separator: " ")
        #expect(entries.count == 2)
        let timestamp = try #require(Int64(request.webhookTimestamp ?? ""))
        for (secret, entry) in zip([new, fixture.secret], entries) {
            #expect(
                WebhookSignature.verify(
                    header: String(entry),
                    secret: try WebhookSecret(secret),
                    id: ids[0].hex,
                    timestamp: timestamp,
                    body: request.body
                )
            )
        }

        // A backend that knows neither secret (a misconfiguration): 401 is retried, never dead.
        _ = try await fixture.capture(2..<3)
        configuration.webhookSecrets = [try WebhookSecret(WebhookSecret.generateText())]
        let mismatched = try ReplayWorker(
            escrow: fixture.escrow,
            configuration: configuration,
            logger: Logger(label: "t")
        )
        let refused = try await mismatched.runOnce()
        #expect(refused.retried == 1 && refused.dead == 0)
        #expect(try await fixture.store.summary(at: Date()).live[.pending] == 1)
        #expect(throws: EscrowError.self) { _ = try WebhookSecret.list("\(new) whsec_") }
    }

    @Test func acceptedWaitsForConfirmationThenIsRedeliveredWithTheSameKey() async throws {
        // An hour's confirmation timeout, passed by moving the clock: a short one would also pass in real time
        // between the two runs below on a loaded machine.
        let fixture = try await ReplayFixture(confirmTimeout: 3_600)
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, count in .status(count == 0 ? 202 : 200) }
        let id = try #require(try await fixture.capture(0..<1).first)
        let worker = try fixture.worker()

        let first = try await worker.runOnce()
        #expect(first.delivered == 1 && first.accepted == 1)
        let waiting = try #require(try await fixture.store.record(id: id))
        #expect(waiting.state == .awaitingConfirmation)
        #expect(try await fixture.types(id).suffix(2) == ["delivery-attempted", "awaiting-confirmation"])
        #expect(try await worker.runOnce().delivered == 0, "not before the confirmation timeout")

        fixture.advance(past: waiting.confirmDeadline)
        let second = try await worker.runOnce()
        #expect(second.delivered == 1 && second.confirmed == 1)
        #expect(try await fixture.store.record(id: id) == nil)
        let requests = fixture.requests(id)
        #expect(requests.count == 2)
        #expect(requests.map(\.attempt) == [1, 2])
        #expect(Set(requests.compactMap(\.idempotencyKey)) == [id.hex])
        fixture.expectClean()
    }

    @Test func acceptedThenConfirmedIsNeverDeliveredAgain() async throws {
        let fixture = try await ReplayFixture(confirmTimeout: 0.1)
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .status(202) }
        let id = try #require(try await fixture.capture(0..<1).first)
        let worker = try fixture.worker()
        #expect(try await worker.runOnce().accepted == 1)
        #expect(try await fixture.escrow.confirm(userIdentifier: Fake.userIdentifier(0)))
        fixture.advance(by: 3600)  // past any confirmation deadline: nothing is left to deliver
        #expect(try await worker.runOnce().delivered == 0)
        #expect(fixture.requests(id).count == 1)
        #expect(try await fixture.types(id).suffix(2) == ["awaiting-confirmation", "purged"])
    }

    @Test(arguments: [500, 503, 429, 408, 425])
    func retryableAnswersAreRetriedHonouringRetryAfter(status: Int) async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, count in count == 0 ? .status(status, headers: ["Retry-After": "1"]) : .status(200) }
        let id = try #require(try await fixture.capture(0..<1).first)
        let worker = try fixture.worker()

        let before = Date()
        let first = try await worker.runOnce()
        let after = Date()
        #expect(first.delivered == 1 && first.retried == 1)
        let pending = try #require(try await fixture.store.record(id: id))
        #expect(pending.state == .pending && pending.lastStatus == status && pending.attempts == 1)
        // Retry-After: 1 wins over the (much shorter) backoff.
        #expect(pending.nextAttemptAt >= before.addingTimeInterval(0.99))
        #expect(pending.nextAttemptAt <= after.addingTimeInterval(1.01))
        let attempted = try #require(try await fixture.events(id).last)
        #expect(attempted.type == .deliveryAttempted && attempted.detail == "retry" && attempted.httpStatus == status)
        #expect(try await worker.runOnce().delivered == 0, "not before Retry-After")

        fixture.advance(past: pending.nextAttemptAt)
        #expect(try await worker.runOnce().confirmed == 1)
        let requests = fixture.requests(id)
        #expect(requests.map(\.attempt) == [1, 2])
        // Signed at the escrow clock's time: the second request went out at least Retry-After later.
        let sent = requests.compactMap { $0.webhookTimestamp.flatMap { Int64($0) } }
        #expect(sent.count == 2 && sent[1] - sent[0] >= 1)
        fixture.expectClean()
    }

    @Test func retryAfterAsAnHTTPDate() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        let target = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 5).rounded(.down))
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let header = formatter.string(from: target)
        fixture.stub.respond { _, _ in .status(503, headers: ["Retry-After": header]) }
        let id = try #require(try await fixture.capture(0..<1).first)
        let before = Date()
        #expect(try await fixture.worker().runOnce().retried == 1)
        let after = Date()
        let pending = try #require(try await fixture.store.record(id: id))
        // The date is a wait from the request's sending, scheduled from the outcome's commit: at the date, or later by
        // as much as the run took (a loaded machine stretches that), never earlier.
        let scheduled = pending.nextAttemptAt.timeIntervalSince(target)
        #expect(
            scheduled >= -0.01 && scheduled <= after.timeIntervalSince(before) + 0.01,
            "\(scheduled) s from \(header)"
        )
    }

    /// A `Retry-After` far in the future (about three years) is capped by the backoff ceiling.
    @Test(arguments: ["99999999", "Fri, 31 Dec 9999 23:59:59 GMT"])
    func aHugeRetryAfterIsCappedAtTheBackoffCeiling(header: String) async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .status(503, headers: ["Retry-After": header]) }
        let id = try #require(try await fixture.capture(0..<1).first)
        let before = Date()
        #expect(try await fixture.worker().runOnce().retried == 1)
        let after = Date()
        let pending = try #require(try await fixture.store.record(id: id))
        let cap = ReplayFixture.retryPolicy().cap
        #expect(pending.state == .pending && pending.lastStatus == 503)
        #expect(pending.nextAttemptAt <= after.addingTimeInterval(cap + 0.01), "capped at \(cap)s")
        #expect(pending.nextAttemptAt >= before.addingTimeInterval(cap - 0.01), "but honoured up to the cap")
    }

    @Test func withoutRetryAfterTheBackoffStaysUnderItsCeiling() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .status(500) }
        let id = try #require(try await fixture.capture(0..<1).first)
        let worker = try fixture.worker()
        let policy = ReplayFixture.retryPolicy()
        for attempt in 1...4 {
            #expect(try await worker.runOnce().retried == 1)
            let committed = try #require(try await fixture.events(id).last).at
            let pending = try #require(try await fixture.store.record(id: id))
            #expect(pending.attempts == attempt)
            let delay = pending.nextAttemptAt.timeIntervalSince(committed)
            // Full jitter: uniform in [0, min(cap, base * 2^(attempt-1))] (millisecond storage).
            #expect(delay >= -0.001 && delay <= policy.ceiling(afterAttempt: attempt) + 0.001)
            fixture.advance(past: pending.nextAttemptAt)
        }
    }

    @Test func aTimeoutIsRetried() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, count in count == 0 ? .delayed(3, .status(200)) : .status(200) }
        let id = try #require(try await fixture.capture(0..<1).first)
        // A second's timeout: the retry below must connect and be answered within it on a loaded two-core machine.
        let worker = try fixture.worker(lease: 2, timeout: 1)

        let first = try await bounded("a timed-out delivery", within: 20) { try await worker.runOnce() }
        #expect(first.delivered == 1 && first.retried == 1)
        let pending = try #require(try await fixture.store.record(id: id))
        #expect(pending.state == .pending && pending.lastStatus == nil)
        let attempted = try #require(try await fixture.events(id).last)
        #expect(attempted.detail == "retry" && attempted.httpStatus == nil)
        // The backend may still be busy with the request: not again before one delivery timeout.
        #expect(pending.nextAttemptAt.timeIntervalSince(attempted.at) >= 1 - 0.001)

        fixture.advance(past: pending.nextAttemptAt)
        #expect(try await worker.runOnce().confirmed == 1)
        #expect(Set(fixture.requests(id).compactMap(\.idempotencyKey)) == [id.hex])
        fixture.expectClean()
    }

    /// A backend (or a proxy) that sends its status line in time, then its body one byte at a time:
    /// the body is read under the same deadline as the request, so the delivery ends within the
    /// delivery timeout instead of as long as bytes keep trickling in (the read timeout restarts
    /// with every byte); the status decides, and the escrow is delivered again with the same key.
    @Test func aDripFedAnswerIsCutOffAtTheDeadlineAndItsStatusDecides() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, count in
            count == 0 ? .dripping(503, headers: ["Retry-After": "1"], every: 0.2, bytes: 100) : .status(200)
        }
        let id = try #require(try await fixture.capture(0..<1).first)
        let worker = try fixture.worker(lease: 5, timeout: 1)

        let started = Date()
        let first = try await bounded("a drip-fed delivery", within: 30) { try await worker.runOnce() }
        let took = Date().timeIntervalSince(started)
        // The drip lasts 20 s: a read timeout restarted by each byte would take that long. The 5 s of slack is for
        // a machine running the whole suite in parallel (a run took 2.4 s), and still tells the two apart.
        #expect(took < 1 + 5, "the delivery took \(took)s, past its 1s timeout")
        #expect(first.delivered == 1 && first.retried == 1)
        let pending = try #require(try await fixture.store.record(id: id))
        #expect(pending.state == .pending && pending.lastStatus == 503 && pending.attempts == 1)
        #expect(pending.nextAttemptAt.timeIntervalSince(started) >= 0.99, "Retry-After from the head")
        #expect(fixture.harness.loggedText().contains("cut off at the deadline"))

        fixture.advance(past: pending.nextAttemptAt)
        #expect(try await worker.runOnce().confirmed == 1)
        let requests = fixture.requests(id)
        #expect(requests.map(\.attempt) == [1, 2])
        #expect(Set(requests.compactMap(\.idempotencyKey)) == [id.hex])
        fixture.expectClean()
    }

    /// The status line is the backend's outcome (docs/replay.md): a `200` heard in time confirms, even when
    /// the deadline cuts off the body that follows it. Delivering again would only send the profile
    /// once more to a backend that said it has it.
    @Test func aConfirmationWhoseBodyIsCutOffStillConfirms() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .dripping(200, every: 0.2, bytes: 100) }
        let id = try #require(try await fixture.capture(0..<1).first)
        let worker = try fixture.worker(lease: 5, timeout: 1)

        let started = Date()
        let summary = try await bounded("a drip-fed confirmation", within: 30) { try await worker.runOnce() }
        let took = Date().timeIntervalSince(started)
        // The drip lasts 20 s: a read timeout restarted by each byte would take that long. The 5 s of slack is for
        // a machine running the whole suite in parallel (a run took 2.4 s), and still tells the two apart.
        #expect(took < 1 + 5, "the delivery took \(took)s, past its 1s timeout")
        #expect(summary.delivered == 1 && summary.confirmed == 1)
        #expect(try await fixture.store.record(id: id) == nil)
        #expect(try await fixture.types(id) == ["captured", "purged"])
        #expect(fixture.requests(id).count == 1)
        #expect(fixture.stub.answered.map(\.status) == [200])
        fixture.expectClean()
    }

    @Test func aRefusedConnectionIsRetried() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        let closed = try await FakeBackend.start(secret: fixture.secret)
        let deadURL = closed.url
        await closed.stop()
        let id = try #require(try await fixture.capture(0..<1).first)
        let summary = try await bounded("a refused delivery", within: 20) {
            try await fixture.worker(url: deadURL).runOnce()
        }
        #expect(summary.delivered == 1 && summary.retried == 1)
        let pending = try #require(try await fixture.store.record(id: id))
        #expect(pending.state == .pending && pending.attempts == 1 && pending.lastStatus == nil)
    }

    @Test func aResetConnectionIsRetried() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, count in count == 0 ? .close : .status(200) }
        let id = try #require(try await fixture.capture(0..<1).first)
        let worker = try fixture.worker()
        #expect(try await worker.runOnce().retried == 1)
        let pending = try #require(try await fixture.store.record(id: id))
        fixture.advance(past: pending.nextAttemptAt)
        #expect(try await worker.runOnce().confirmed == 1)
        #expect(fixture.requests(id).map(\.attempt) == [1, 2])
        fixture.expectClean()
    }

    @Test(arguments: [400, 410, 422])
    func aRejectionIsDeadAfterOneAttemptAndRequeueDeliversAgain(status: Int) async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .status(status) }
        let id = try #require(try await fixture.capture(0..<1).first)
        let worker = try fixture.worker()

        let first = try await worker.runOnce()
        #expect(first.delivered == 1 && first.dead == 1)
        let dead = try #require(try await fixture.store.record(id: id))
        #expect(dead.state == .dead && dead.deadCode == .rejected && dead.attempts == 1 && dead.lastStatus == status)
        let deadEvent = try #require(try await fixture.events(id).last)
        #expect(deadEvent.type == .dead && deadEvent.detail == "backend_rejected" && deadEvent.httpStatus == status)
        #expect(try await worker.runOnce().delivered == 0, "dead escrows are not delivered")

        fixture.stub.respond { _, _ in .status(200) }  // the backend is fixed
        #expect(try await fixture.escrow.requeue(id: id))
        #expect(try await worker.runOnce().confirmed == 1)
        #expect(try await fixture.store.record(id: id) == nil)
        #expect(
            try await fixture.types(id) == [
                "captured", "delivery-attempted", "dead", "requeued", "purged",
            ]
        )
        #expect(Set(fixture.requests(id).compactMap(\.idempotencyKey)) == [id.hex])
        fixture.expectClean()
    }

    @Test func exhaustedAttemptsGoDead() async throws {
        let fixture = try await ReplayFixture(maxAttempts: 3)
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .status(503, headers: ["Retry-After": "0"]) }
        let id = try #require(try await fixture.capture(0..<1).first)
        let worker = try fixture.worker()
        var summaries: [ReplaySummary] = []
        for _ in 0..<5 {
            summaries.append(try await worker.runOnce())
            fixture.advance(by: 0.01)  // Retry-After: 0 is due right after the commit
        }
        #expect(summaries.map(\.delivered) == [1, 1, 1, 0, 0])
        #expect(summaries.map(\.dead) == [0, 0, 1, 0, 0])
        let dead = try #require(try await fixture.store.record(id: id))
        #expect(dead.state == .dead && dead.deadCode == .attemptsExhausted)
        #expect(fixture.requests(id).map(\.attempt) == [1, 2, 3])
        #expect(try await fixture.events(id).last?.detail == "attempts_exhausted")
    }

    @Test func aRedirectIsNotFollowed() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        let elsewhere = "http://127.0.0.1:\(fixture.stub.port)/elsewhere"
        fixture.stub.respond { _, _ in .status(302, headers: ["Location": elsewhere]) }
        let id = try #require(try await fixture.capture(0..<1).first)
        let summary = try await fixture.worker().runOnce()
        // Not followed; an unexpected status is retried later (docs/replay.md lists 3xx nowhere else).
        #expect(summary.delivered == 1 && summary.retried == 1)
        #expect(fixture.stub.requests.map(\.path) == ["/register"])
        #expect(try await fixture.store.record(id: id)?.lastStatus == 302)
    }

    @Test func expiredEscrowsAreSweptEvenWhenTheBackendIsDown() async throws {
        let fixture = try await ReplayFixture(retention: 60)
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .status(503) }
        try await fixture.capture(0..<5, ago: 120)
        let fresh = try await fixture.capture(5..<6)
        let summary = try await fixture.worker().runOnce()
        #expect(summary.expiredSwept == 5)
        #expect(summary.delivered == 1, "only the fresh escrow is delivered")
        let report = try await PurgeReport.build(store: fixture.store, verify: true)
        #expect(report.purged[.expired] == 5 && report.overdue == 0 && report.live[.pending] == 1)
        #expect(try await fixture.store.record(id: fresh[0])?.state == .pending)
    }

    @Test(
        arguments: [
            ("https://api.example.com/register", nil), ("http://127.0.0.1:8080/register", nil),
            ("http://127.1.2.3/register", nil), ("http://localhost:9000/register", nil),
            ("http://LOCALHOST/register", nil), ("http://[::1]:8080/register", nil),
            ("http://api.example.com/register", "api.example.com"), ("HTTP://10.0.0.7/register", "10.0.0.7"),
            ("http://127.0.0.1.example.com/x", "127.0.0.1.example.com"), ("http://[2001:db8::1]/x", "[2001:db8::1]"),
        ] as [(String, String?)]
    )
    func cleartextBackendsAreRecognised(url: String, host: String?) throws {
        let configuration = try ReplayWorker.Configuration(
            backendURL: url,
            webhookSecret: WebhookSecret.generateText()
        )
        func bare(_ host: String?) -> String? {
            host?.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        }
        #expect(bare(configuration.cleartextHost) == bare(host))
    }

    /// Plain http to a host that is not loopback works (TLS may end in a proxy) but is warned about,
    /// once, naming the host; loopback stays silent.
    @Test func plainHTTPToARemoteHostIsWarnedAboutOnce() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .status(200) }
        try await fixture.capture(0..<2)
        #expect(try await fixture.worker().runOnce().confirmed == 2)
        #expect(!fixture.harness.loggedText().contains("unencrypted"), "loopback: no warning")

        _ = try fixture.worker(id: "w2", url: "http://backend.example.invalid/register")
        let warnings = fixture.harness.logs.entries.filter { $0.message.description.contains("unencrypted") }
        #expect(warnings.count == 1)
        #expect(warnings.first?.level == .warning)
        #expect(warnings.first?.metadata["backend.host"] == "backend.example.invalid")
    }

    /// The worker never flushes the store itself: the one flusher of a process is the PurgeFlusher that
    /// `EscrowServiceGroup.replayServices` runs beside it (as `replay` and `serve` do).
    @Test(arguments: [true, false])
    func purgesAreFlushedByTheProcessFlusherOnly(withFlusher: Bool) async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .status(200) }
        let counting = ObservedStore(fixture.store)
        let escrow = fixture.escrow(over: counting)
        try await fixture.capture(0..<5)
        let configuration = try fixture.configuration()
        let services: [any Service] =
            withFlusher
            ? try EscrowServiceGroup.replayServices(
                escrow: escrow,
                worker: configuration,
                flushInterval: .milliseconds(100),
                logger: Logger(label: "test")
            )
            : [try ReplayWorker(escrow: escrow, configuration: configuration, logger: Logger(label: "test"))]

        let group = ServiceGroup(services: services, logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        try await eventually("every escrow confirmed") {
            try await fixture.store.summary(at: Date()).live.values.reduce(0, +) == 0
        }
        if withFlusher {
            // The flush interval is counted on the escrow's clock: moved one interval a poll.
            try await eventually("a flush within the interval, while running") {
                fixture.advance(by: 0.1)
                return counting.flushes >= 1
            }
        } else {
            // Three flush intervals on the escrow's clock, and three more rounds of the worker (a claim each) in
            // which no flush may come.
            let rounds = counting.claims
            fixture.advance(by: 0.3)
            try await eventually("three more rounds of the worker") { counting.claims >= rounds + 3 }
        }
        await group.triggerGracefulShutdown()
        try await bounded("shutdown", within: 20) { try await running.value }
        if !withFlusher { #expect(counting.flushes == 0) }
    }

    /// A delivery frees its slot once the backend has answered, before its outcome is committed: while the store
    /// holds commits back, the worker goes on delivering until four times as many deliveries as it has slots wait, and
    /// no further; the backend never sees more than `concurrency` requests at once; nothing is lost on the way.
    @Test func anAnsweredDeliveryFreesItsSlotBeforeItsCommit() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        // A short pause in every answer, so that both slots are surely busy at once.
        fixture.stub.respond { _, _ in .delayed(0.05, .status(200)) }
        let observed = ObservedStore(fixture.store)
        let escrow = fixture.escrow(over: observed)
        let ids = try await fixture.capture(0..<12)
        let worker = try ReplayWorker(
            escrow: escrow,
            configuration: try fixture.configuration(concurrency: 2),
            logger: Logger(label: "test")
        )
        observed.holdCommits(true)
        defer { observed.holdCommits(false) }  // also when an expectation below throws
        let running = Task { try await worker.runOnce() }
        try await eventually("eight answered outcomes waiting for their commit", within: 20) {
            observed.waitingCommits == 8
        }
        // Time for a ninth delivery, which must not come (real time: the worker runs on the real clock).
        try await pause(for: .milliseconds(300))
        #expect(observed.waitingCommits == 8, "four times the concurrency, and no more")
        #expect(fixture.stub.requests.count == 8)
        observed.holdCommits(false)
        let summary = try await bounded("the run", within: 30) { try await running.value }
        #expect(summary.delivered == 12 && summary.confirmed == 12)
        #expect(fixture.stub.mostAtOnce == 2, "at most `concurrency` requests at once")
        for id in ids {
            #expect(try await fixture.types(id) == ["captured", "purged"])
        }
        #expect(fixture.stub.requests.count == 12)
    }

    /// The running worker's waits are counted on the escrow's clock: a worker that polls every hour (and sweeps every
    /// hour) claims the retry of a failed delivery once the clock is moved an hour on, and not before. On real-time
    /// waits it would sleep through the test.
    @Test func aRunningWorkerWakesWhenTheClockIsMovedPastItsNextPoll() async throws {
        let fixture = try await ReplayFixture()
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, count in count == 0 ? .status(503, headers: ["Retry-After": "60"]) : .status(200) }
        let id = try #require(try await fixture.capture(0..<1).first)
        var configuration = try fixture.configuration()
        configuration.pollInterval = 3_600
        configuration.sweepInterval = 3_600
        let worker = try ReplayWorker(escrow: fixture.escrow, configuration: configuration, logger: Logger(label: "t"))
        let group = ServiceGroup(services: [worker], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        try await eventually("the first attempt, retried in a minute") {
            try await fixture.store.record(id: id)?.attempts == 1
        }
        let pending = try #require(try await fixture.store.record(id: id))
        #expect(pending.state == .pending && pending.lastStatus == 503)

        // Due in a minute, but the worker claims again only at its next poll, an hour on.
        fixture.advance(past: pending.nextAttemptAt)
        #expect(try await fixture.store.record(id: id)?.attempts == 1)
        fixture.advance(by: 3_600)
        try await eventually("the retry, once the clock is past the next poll", within: 10) {
            try await fixture.store.record(id: id) == nil
        }
        #expect(fixture.requests(id).map(\.attempt) == [1, 2])
        await group.triggerGracefulShutdown()
        try await bounded("shutdown", within: 20) { try await running.value }
    }

    @Test func theServiceLoopSweepsWhileTheBackendIsDown() async throws {
        let fixture = try await ReplayFixture(retention: 60)
        defer { Task { await fixture.stub.stop() } }
        fixture.stub.respond { _, _ in .status(503) }
        let worker = try fixture.worker()
        let group = ServiceGroup(services: [worker], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        try await fixture.capture(0..<3, ago: 120)  // expired while running
        try await eventually("the sweep") { try await fixture.store.summary(at: Date()).live.values.reduce(0, +) == 0 }
        await group.triggerGracefulShutdown()
        try await bounded("shutdown", within: 20) { try await running.value }
        let report = try await PurgeReport.build(store: fixture.store, verify: true)
        #expect(report.purged[.expired] == 3 && !report.hasProblem)
    }
}
