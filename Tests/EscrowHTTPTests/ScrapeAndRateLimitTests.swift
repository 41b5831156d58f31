import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import ProfileEscrow
import Prometheus
import Testing

@testable import EscrowHTTP
@testable import EscrowSQLite

@Suite("/metrics reads counters only; requests without a token are rate-limited")
struct ScrapeAndRateLimitTests {
    @Test("a burst of scrapes over many escrows never runs the summary query, and captures still answer")
    func scrapesNeverScan() async throws {
        var harness = try await HTTPHarness()
        harness.configuration.anonymousRateLimit = RateLimit(requestsPerSecond: 1_000, burst: 1_000)
        for number in 1...300 {
            _ = try await harness.escrow.capture(
                try ProfileParser.parse(Array(Fake.body(number).readableBytesView)).profile
            )
        }
        let queriesBefore = harness.store.summaryQueryCount
        let app = harness
        try await app.app().test(.router) { client async throws in
            try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for _ in 0..<200 {
                    group.addTask { try await client.execute(uri: "/metrics", method: .get).status }
                }
                for number in 1001...1010 {
                    group.addTask {
                        try await client.execute(
                            uri: "/v1/escrows",
                            method: .post,
                            headers: app.headers(json: true),
                            body: Fake.body(number)
                        ).status
                    }
                }
                var statuses: [HTTPResponse.Status] = []
                for try await status in group { statuses.append(status) }
                #expect(statuses.filter { $0 == .ok }.count == 200, "every scrape answered")
                #expect(statuses.filter { $0 == .created }.count == 10, "every capture answered")
            }
        }
        #expect(harness.store.summaryQueryCount == queriesBefore, "no scrape ran the summary")
        #expect(try await harness.liveCount() == 310)
    }

    @Test("the refresher publishes the live gauges with one summary query")
    func refresherPublishes() async throws {
        let harness = try await HTTPHarness()
        _ = try await harness.escrow.capture(try ProfileParser.parse(Array(Fake.body(1).readableBytesView)).profile)
        let before = harness.store.summaryQueryCount
        await LiveGaugeRefresher(
            escrow: harness.escrow,
            factory: PrometheusMetricsFactory(registry: harness.registry),
            logger: harness.logger
        ).refresh()
        #expect(harness.store.summaryQueryCount == before + 1)
        let text = try await harness.app().test(.router) { client async throws in
            try await client.execute(uri: "/metrics", method: .get).text
        }
        #expect(text.contains("profile_escrow_live{state=\"pending\"} 1"))
    }

    @Test(
        "an open /metrics and Apple notifications: 429 with Retry-After past the limit",
        arguments: [
            ("/metrics", HTTPRequest.Method.get), ("/v1/apple/notifications", .post),
        ]
    )
    func anonymousLimited(path: String, method: HTTPRequest.Method) async throws {
        var harness = try await HTTPHarness()
        harness.configuration.anonymousRateLimit = RateLimit(requestsPerSecond: 0.001, burst: 3)
        let statuses = try await harness.app().test(.router) { client async throws in
            var statuses: [TestResponse] = []
            for _ in 0..<4 {
                statuses.append(
                    try await client.execute(
                        uri: path,
                        method: method,
                        headers: [.contentType: "application/json"],
                        body: Fake.body(["payload": "x"])
                    )
                )
            }
            return statuses
        }
        #expect(statuses.prefix(3).allSatisfy { $0.status != .tooManyRequests })
        #expect(statuses[3].status == .tooManyRequests)
        #expect(statuses[3].headers[.retryAfter] != nil)
        #expect(statuses[3].headers[.contentType] == "application/problem+json")
    }

    @Test("probes are never limited: /healthz and /readyz answer past any limit", arguments: ["/healthz", "/readyz"])
    func probesNeverLimited(path: String) async throws {
        var harness = try await HTTPHarness()
        harness.configuration.anonymousRateLimit = RateLimit(requestsPerSecond: 0.001, burst: 1)
        harness.configuration.anonymousOverallRateLimit = RateLimit(requestsPerSecond: 0.001, burst: 1)
        let statuses = try await harness.app().test(.router) { client async throws in
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<20 { statuses.append(try await client.execute(uri: path, method: .get).status) }
            return statuses
        }
        #expect(statuses.allSatisfy { $0 == .ok })
    }
}
