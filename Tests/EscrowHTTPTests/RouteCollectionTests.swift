import CoreMetrics
import EscrowCore
import EscrowTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import InMemoryLogging
import Logging
import NIOCore
import Prometheus
import Testing

@testable import EscrowHTTP

/// A user's own request context, with a field of its own: the escrow routes work with it.
struct AppContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    var tenant: String = "example"

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
    }
}

@Suite("The escrow routes in a user's application")
struct RouteCollectionTests {
    @Test("split in two: the public surface (sign-in, notifications) and the internal one (token-guarded)")
    func publicAndInternalSurfaces() async throws {
        let flow = try await SignInFlow()
        let harness = flow.harness
        func mounted(_ surface: EscrowRouteCollection.Surface) -> Router<AppContext> {
            let router = Router(context: AppContext.self)
            router.addRoutes(
                EscrowRouteCollection.make(
                    escrow: harness.escrow,
                    tokens: harness.tokenStore,
                    notifications: harness.store,
                    signIns: harness.store,
                    configuration: harness.configuration,
                    dependencies: harness.dependencies,
                    surface: surface,
                    context: AppContext.self
                ),
                atPath: "/v1"
            )
            return router
        }
        let publicApp = Application(router: mounted(.publicAPI))
        let internalApp = Application(router: mounted(.internalAPI))
        try await publicApp.test(.router) { client async throws in
            #expect(try await client.execute(uri: "/v1/apple/signin?return=app", method: .get).status == .found)
            let escrows = try await harness.capture(client)
            #expect(escrows.status == .notFound, "no token-guarded route on the public surface")
            let redeem = try await client.execute(uri: "/v1/apple/signin/tickets/redeem", method: .post)
            #expect(redeem.status == .notFound)
        }
        try await internalApp.test(.router) { client async throws in
            #expect(try await client.execute(uri: "/v1/apple/signin?return=app", method: .get).status == .notFound)
            #expect(try await client.execute(uri: "/v1/apple/notifications", method: .post).status == .notFound)
            let escrows = try await harness.capture(client)
            #expect(escrows.status == .unauthorized, "served (verified capture: the body has no identity token)")
            let redeem = try await flow.redeem(client, "unknown-ticket")
            #expect(redeem.status == .gone)
        }
    }

    @Test("mounted under /auth/escrow beside the application's own routes, with its own context")
    func mountedUnderAPrefix() async throws {
        let harness = try await HTTPHarness()
        let router = Router(context: AppContext.self)
        router.get("/hello") { _, context in context.tenant }
        router.addRoutes(
            EscrowRouteCollection.make(escrow: harness.escrow, tokens: harness.tokenStore, context: AppContext.self),
            atPath: "/auth/escrow"
        )
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.router) { client async throws in
            #expect(try await client.execute(uri: "/hello", method: .get).status == .ok)
            let captured = try await harness.capture(client, at: "/auth/escrow/escrows")
            #expect(captured.status == .created)
            let status = try await client.execute(
                uri: "/auth/escrow/escrows/\(Fake.userIdentifier(1))",
                method: .get,
                headers: harness.headers()
            )
            #expect(status.status == .ok)
            #expect(status.json["state"] as? String == "pending")
            #expect(status.json["attempts"] as? Int == 0)
            // Errors inside the collection are problem+json, as in `serve`.
            let unauthorized = try await client.execute(uri: "/auth/escrow/escrows", method: .post, headers: [:])
            #expect(unauthorized.status == .unauthorized)
            #expect(unauthorized.headers[.contentType] == "application/problem+json")
            let confirmed = try await client.execute(
                uri: "/auth/escrow/escrows/\(Fake.userIdentifier(1))/confirm",
                method: .post,
                headers: harness.headers()
            )
            #expect(confirmed.json["purged"] as? Bool == true)
            // Not mounted at the standalone paths.
            #expect(try await client.execute(uri: "/v1/escrows", method: .post).status == .notFound)
        }
        #expect(try await harness.liveCount() == 0)
    }

    @Test("metrics by Prometheus convention: _total counters, _seconds durations, HELP for every family")
    func metricNames() async throws {
        let registry = PrometheusCollectorRegistry()
        let factory = EscrowPrometheus.factory(registry: registry)
        factory.makeCounter(
            label: "hb.requests",
            dimensions: [("http.route", "/v1/escrows"), ("http.response.status_code", "201")]
        )
        .increment(by: 1)
        factory.makeTimer(label: "http.server.request.duration", dimensions: [("http.route", "/v1/escrows")])
            .recordNanoseconds(2_000_000)
        factory.makeCounter(label: "profile_escrow_captures_total", dimensions: []).increment(by: 1)
        let text = String(decoding: EscrowPrometheus.emit(registry), as: UTF8.self)
        #expect(text.contains("http_server_requests_total{route=\"/v1/escrows\",status=\"201\"} 1"))
        #expect(text.contains("http_server_request_duration_seconds_bucket"))
        #expect(!text.contains("hb_requests") && !text.contains("http_route"))
        let families = text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map {
            $0.split(separator: " ")[2]
        }
        #expect(families.count == 3)
        for family in families {
            #expect(text.contains("# HELP \(family) "), "HELP for \(family)")
        }
    }

    @Test("/readyz answers 503 once the process drains")
    func readyWhileDraining() async throws {
        let harness = try await HTTPHarness()
        let draining = DrainState()
        let app = try EscrowHTTPApplication.build(
            escrow: harness.escrow,
            tokens: harness.tokenStore,
            notifications: harness.store,
            registry: harness.registry,
            configuration: harness.configuration,
            draining: draining,
            logger: harness.logger
        )
        try await app.test(.router) { client async throws in
            #expect(try await client.execute(uri: "/readyz", method: .get).status == .ok)
            draining.startDraining()
            let ready = try await client.execute(uri: "/readyz", method: .get)
            #expect(ready.status == .serviceUnavailable)
            #expect(ready.json["code"] as? String == "draining")
            #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)
        }
    }

    @Test("access log lines name the token, never the token itself")
    func accessLogNamesTheToken() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            _ = try await client.execute(
                uri: "/v1/escrows",
                method: .post,
                headers: harness.headers("capture", json: true),
                body: Fake.body(1)
            )
        }
        let line = try #require(harness.logs.entries.first { $0.message.description == "request" })
        #expect(line.metadata["http.token"]?.description == "scope-capture")
        #expect(line.metadata["duration.ms"] != nil)
        let logged = harness.loggedText()
        for token in harness.tokens.values { #expect(!logged.contains(token)) }
        for canary in Fake.tokens { #expect(!logged.contains(canary)) }
    }

    @Test("the caller a route group authenticated reaches the access log, also when its scope is refused (403)")
    func accessLogNamesARefusedCaller() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            let response = try await client.execute(
                uri: "/v1/admin/overview",
                method: .get,
                headers: harness.headers("capture")
            )
            #expect(response.status == .forbidden)
            #expect(try await client.execute(uri: "/v1/admin/overview", method: .get).status == .unauthorized)
        }
        let lines = harness.logs.entries.filter { $0.message.description == "request" }
        #expect(lines.count == 2)
        #expect(lines.first?.metadata["http.status"]?.description == "403")
        #expect(lines.first?.metadata["http.token"]?.description == "scope-capture")
        #expect(lines.last?.metadata["http.token"] == nil, "no token, no caller")
    }

    @Test("sign-in off: its routes answer 404, the redeem after its token check (401, 403), as the contract says")
    func signInOff() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            let redeem = "/v1/apple/signin/tickets/redeem"
            let body = Fake.body(["ticket": "unknown-ticket"])
            let anonymous = try await client.execute(uri: redeem, method: .post, body: body)
            #expect(anonymous.status == .unauthorized)
            let reader = try await client.execute(
                uri: redeem,
                method: .post,
                headers: harness.headers("read"),
                body: body
            )
            #expect(reader.status == .forbidden)
            let signIn = try await client.execute(
                uri: redeem,
                method: .post,
                headers: harness.headers("signin", json: true),
                body: body
            )
            #expect(signIn.status == .notFound && signIn.json["code"] as? String == "route_not_found")
            #expect(try await client.execute(uri: "/v1/apple/signin?return=app", method: .get).status == .notFound)
            #expect(try await client.execute(uri: "/v1/apple/signin/callback", method: .post).status == .notFound)
            // Their paths are still the contract's: another method is a 405 naming the one they answer.
            for (path, allowed) in [
                ("/v1/apple/signin", "GET"), ("/v1/apple/signin/callback", "POST"),
                ("/v1/apple/signin/tickets/redeem", "POST"),
            ] {
                let other = try await client.execute(uri: path, method: .put)
                #expect(other.status == .methodNotAllowed, "\(path)")
                #expect(other.headers[.allow]?.contains(allowed) == true, "\(path): \(other.headers[.allow] ?? "")")
            }
        }
    }
}
