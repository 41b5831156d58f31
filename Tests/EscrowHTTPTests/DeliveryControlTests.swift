import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import ProfileEscrow
import Prometheus
import ServiceLifecycle
import Testing

@testable import EscrowHTTP

/// The delivery switch end to end: paused and resumed through the admin API over loopback while a real worker polls
/// the same SQLite file and delivers to a real backend, and through the CLI on that file.
@Suite("Delivery controls: pause and resume")
struct DeliveryControlTests {
    static func reason(_ text: String) -> ByteBuffer { Fake.body(["reason": text]) }

    /// A running worker on the harness' escrow, delivering to `backend`; stopped by `stop`.
    static func startWorker(_ harness: HTTPHarness, _ backend: FakeBackend, secret: String) throws -> ServiceGroup {
        var configuration = try ReplayWorker.Configuration(backendURL: backend.url, webhookSecret: secret)
        configuration.workerID = "w1"
        configuration.pollInterval = 0.02
        configuration.sweepInterval = 0.2
        let worker = try ReplayWorker(escrow: harness.escrow, configuration: configuration, logger: harness.logger)
        return ServiceGroup(services: [worker], logger: Logger(label: "test"))
    }

    @Test("paused through the admin API, a running worker claims nothing while captures go on; resumed, it delivers")
    func pauseHoldsTheWorkerAndResumeDelivers() async throws {
        let harness = try await HTTPHarness()
        let secret = WebhookSecret.generateText()
        let backend = try await FakeBackend.start(secret: secret)
        backend.respond { _, _ in .status(200) }
        let group = try Self.startWorker(harness, backend, secret: secret)
        let running = Task { try await group.run() }
        try await harness.app().test(.live) { client async throws in
            let operate = harness.headers("operate", json: true)
            // Only `operate` changes the switch; `read` reads it.
            let refused = try await client.execute(
                uri: "/v1/admin/deliveries/pause",
                method: .post,
                headers: harness.headers("read", json: true),
                body: Self.reason("backend deploy")
            )
            #expect(refused.status == .forbidden)
            let noReason = try await client.execute(
                uri: "/v1/admin/deliveries/pause",
                method: .post,
                headers: operate,
                body: Fake.body([:])
            )
            #expect(noReason.status == .badRequest)

            let paused = try await client.execute(
                uri: "/v1/admin/deliveries/pause",
                method: .post,
                headers: operate,
                body: Self.reason("backend deploy")
            )
            #expect(paused.status == .ok)
            #expect(paused.json["paused"] as? Bool == true)
            #expect(paused.json["changed"] as? Bool == true)

            // Captures go on while paused; the worker keeps polling and claims none of them.
            for number in 1...5 { #expect(try await harness.capture(client, user: number).status == .created) }
            try await Task.sleep(for: .milliseconds(600))  // 30 polls of the worker
            #expect(backend.requests.count == 0, "nothing delivered while paused")
            let pending = try await harness.store.summary(at: harness.clock.now()).live[.pending]
            #expect(pending == 5, "every capture still pending, none leased")

            let state = try await client.execute(
                uri: "/v1/admin/deliveries",
                method: .get,
                headers: harness.headers("read")
            )
            #expect(state.status == .ok)
            #expect(state.json["paused"] as? Bool == true)
            #expect(state.json["pausedBy"] as? String == "http:scope-operate")
            #expect(state.json["reason"] as? String == "backend deploy")
            #expect(state.json["pausedAt"] is String)
            #expect(state.json["ratePerSecond"] is NSNull)
            // Retention is 30 days: nothing held expires within the day.
            #expect(state.json["expiringWhilePaused"] as? Int == 0)
            let overview = try await client.execute(
                uri: "/v1/admin/overview",
                method: .get,
                headers: harness.headers("read")
            )
            #expect((overview.json["deliveries"] as? [String: Any])?["paused"] as? Bool == true)

            let resumed = try await client.execute(
                uri: "/v1/admin/deliveries/resume",
                method: .post,
                headers: operate,
                body: Self.reason("deploy done")
            )
            #expect(resumed.json["paused"] as? Bool == false)
            #expect(resumed.json["resumedBy"] as? String == "http:scope-operate")
            try await eventually("all five delivered after the resume", within: 20) {
                try await harness.liveCount() == 0
            }
            #expect(backend.requests.count == 5)
            let again = try await client.execute(
                uri: "/v1/admin/deliveries/resume",
                method: .post,
                headers: operate,
                body: Self.reason("deploy done")
            )
            #expect(again.json["changed"] as? Bool == false, "resuming running deliveries changes nothing")
        }
        await group.triggerGracefulShutdown()
        try await bounded("worker shutdown", within: 20) { try await running.value }
        await backend.stop()

        let switches = try await harness.auditEvents().map(\.draft).filter {
            $0.type == .deliveriesPaused || $0.type == .deliveriesResumed
        }
        #expect(switches.map(\.type) == [.deliveriesPaused, .deliveriesResumed], "one event a change")
        #expect(switches.map(\.actor) == [.http(token: "scope-operate"), .http(token: "scope-operate")])
        #expect(switches.map(\.reason) == ["backend deploy", "deploy done"])
        #expect(try await auditChainIsIntact(harness.store))
        #expect(harness.loggedText().contains("deliveries paused: claiming nothing"))
    }

    @Test("the gauge profile_escrow_deliveries_paused is 1 while paused, 0 once resumed")
    func gauge() async throws {
        let harness = try await HTTPHarness()
        let actions = OperatorActions(escrow: harness.escrow)
        let refresher = LiveGaugeRefresher(
            escrow: harness.escrow,
            factory: PrometheusMetricsFactory(registry: harness.registry),
            logger: harness.logger
        )
        try await harness.app().test(.router) { client async throws in
            _ = try await actions.pauseDeliveries(reason: try OperatorActions.reason("INC-1"), actor: .cli)
            await refresher.refresh()
            let paused = try await client.execute(uri: "/metrics", method: .get)
            #expect(paused.text.contains("profile_escrow_deliveries_paused 1"))
            _ = try await actions.resumeDeliveries(reason: try OperatorActions.reason("INC-1 done"), actor: .cli)
            await refresher.refresh()
            let resumed = try await client.execute(uri: "/metrics", method: .get)
            #expect(resumed.text.contains("profile_escrow_deliveries_paused 0"))
        }
    }

    @Test("deliveries pause, status and resume from the CLI on the same file the server reads")
    func cli() async throws {
        let harness = try await HTTPHarness()
        let folder = harness.directory.path
        try harness.keyring.write(path: folder + "/keyring", overwrite: false)
        func run(_ arguments: [String]) async throws -> ProfileEscrowCLI.Result {
            try await ProfileEscrowCLI.run(
                ["deliveries"] + arguments,
                environment: [
                    "PROFILE_ESCROW_DATABASE": harness.databasePath, "PROFILE_ESCROW_KEYRING": folder + "/keyring",
                ],
                in: folder
            )
        }
        let paused = try await run(["pause", "--reason", "incident 42"])
        #expect(paused.status == 0, "\(paused.stderr)")
        #expect(paused.stdout.contains("deliveries paused"))
        await #expect(try run(["pause", "--reason", "incident 42"]).stdout.contains("already paused"))
        let status = try await run(["status"])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains("deliveries: paused"))
        #expect(status.stdout.contains("by: cli"))
        #expect(status.stdout.contains("reason: incident 42"))
        await #expect(try run(["pause"]).status == 2, "a reason is required")
        await #expect(try run(["pause", "--reason", "  "]).status == 2, "a blank reason is refused")

        try await harness.app().test(.live) { client async throws in
            let state = try await client.execute(
                uri: "/v1/admin/deliveries",
                method: .get,
                headers: harness.headers("read")
            )
            #expect(state.json["paused"] as? Bool == true, "the server reads what the CLI wrote")
            #expect(state.json["pausedBy"] as? String == "cli")
        }
        let resumed = try await run(["resume", "--reason", "incident 42 closed"])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        await #expect(try run(["status"]).stdout.contains("deliveries: running"))
        let switches = try await harness.auditEvents().map(\.draft).filter {
            $0.type == .deliveriesPaused || $0.type == .deliveriesResumed
        }
        #expect(switches.map(\.actor) == [.cli, .cli])
        #expect(switches.map(\.reason) == ["incident 42", "incident 42 closed"])
    }
}
