import EscrowSQLite
import EscrowTestSupport
import Foundation
import ProfileEscrow
import Prometheus
import Testing

@testable import EscrowHTTP

/// The outbox's metrics, read from a Prometheus registry of the test's own (the process's metrics system is left
/// alone): forwarded notifications counted by outcome, and the gauge of entries waiting.
@Suite("Notification outbox: metrics")
struct NotificationOutboxMetricsTests {
    let outbox = NotificationOutboxTests()

    /// A backend answering `reply`, a harness recording through a forwarder whose metrics go to `registry`.
    func queueing(
        _ registry: PrometheusCollectorRegistry,
        answering reply: FakeBackend.Reply,
        configure: (inout NotificationForwarder.Configuration) -> Void = { _ in }
    ) async throws -> (FakeBackend, HTTPHarness, NotificationForwarder) {
        let backend = try await FakeBackend.start(secret: WebhookSecret.generateText())
        backend.respond { _, _ in reply }
        var harness = try await HTTPHarness(apple: try await outbox.keys.verifier())
        let forwarder = try harness.forwarder(
            to: backend,
            factory: EscrowPrometheus.factory(registry: registry),
            configure: configure
        )
        harness.dependencies.notificationForwarder = forwarder
        return (backend, harness, forwarder)
    }

    /// The value of the one sample named `series` (with its labels, as exposed), nil when it is not exposed.
    func sample(_ registry: PrometheusCollectorRegistry, _ series: String) -> Double? {
        let text = String(decoding: EscrowPrometheus.emit(registry), as: UTF8.self)
        for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1))
        }
        return nil
    }

    static let forwarded = "profile_escrow_notifications_forwarded_total"
    static let entries = "profile_escrow_notification_outbox_entries"

    func forwarded(_ registry: PrometheusCollectorRegistry, _ outcome: String) -> Double? {
        sample(registry, "\(Self.forwarded){outcome=\"\(outcome)\"}")
    }

    @Test("a delivered forward counts as delivered; the gauge counts the entry, then none")
    func delivered() async throws {
        let registry = PrometheusCollectorRegistry()
        let (backend, harness, forwarder) = try await queueing(registry, answering: .status(204))
        try await outbox.notify(harness, number: 3)
        #expect(sample(registry, Self.entries) == nil, "no gauge before the forwarder counts")
        let task = outbox.running(forwarder)
        try await eventually("forwarded", within: 20) { backend.answered.map(\.status) == [204] }
        try await eventually("counted as delivered", within: 10) { forwarded(registry, "delivered") == 1 }
        // The forwarder counted the queued entry before sending it; it counts again within its interval.
        try await eventually("the gauge at 0", within: 20) { sample(registry, Self.entries) == 0 }
        for outcome in ["rejected", "given_up", "unopenable", "full"] {
            #expect(forwarded(registry, outcome) == 0, "every outcome exposed, at 0: \(outcome)")
        }
        let text = String(decoding: EscrowPrometheus.emit(registry), as: UTF8.self)
        #expect(text.contains("# HELP \(Self.forwarded) ") && text.contains("# HELP \(Self.entries) "))
        #expect(!text.contains("apple-") && !text.contains(Fake.userIdentifier(3)), "no webhook id, no user")
        await outbox.stop(task)
        await backend.stop()
    }

    @Test("a forward given up counts as given_up, the entry waiting counted until then")
    func givenUp() async throws {
        let registry = PrometheusCollectorRegistry()
        let (backend, harness, forwarder) = try await queueing(registry, answering: .status(503)) {
            $0.maximumAttempts = 2
            $0.maximumBackoff = 0.3
        }
        try await outbox.notify(harness, number: 4)
        let task = outbox.running(forwarder)
        try await eventually("the entry counted", within: 10) { sample(registry, Self.entries) == 1 }
        try await eventually("given up", within: 20) { forwarded(registry, "given_up") == 1 }
        #expect(backend.requests.count == 2)
        #expect(forwarded(registry, "delivered") == 0, "not delivered")
        try await eventually("the gauge at 0", within: 20) { sample(registry, Self.entries) == 0 }
        await outbox.stop(task)
        await backend.stop()
    }

    @Test("a notification the full outbox refuses counts as full")
    func full() async throws {
        let registry = PrometheusCollectorRegistry()
        let (backend, harness, _) = try await queueing(registry, answering: .status(204)) { $0.capacity = 0 }
        try await outbox.notify(harness, number: 5)
        #expect(forwarded(registry, "full") == 1)
        #expect(try await harness.store.outboxCount() == 0)
        await backend.stop()
    }
}
