import AsyncHTTPClient
import EscrowCrypto
import EscrowTestSupport
import Foundation
import NIOCore
import NIOHTTP1
import ProfileEscrow
import Testing

/// `--delivery-rate`, as an operator runs it: real `serve` and `replay` processes on one SQLite file, delivering to a
/// real backend over loopback. The rate is for the whole cluster: the processes take turns from one schedule in the
/// store.
@Suite("Delivery rate for the cluster", .serialized)
struct DeliveryRateTests {
    static let escrows = 40
    static let rate = 10

    /// The backend's requests' arrival times, sorted, in seconds from the first.
    static func offsets(_ backend: FakeBackend) -> [Double] {
        let times = backend.requests.map(\.at).sorted()
        return times.map { $0.timeIntervalSince(times[0]) }
    }

    /// The most requests that arrived within any one second.
    static func busiestSecond(_ offsets: [Double]) -> Int {
        offsets.indices.map { start in offsets[start...].prefix { $0 < offsets[start] + 1 }.count }.max() ?? 0
    }

    /// 40 escrows at 10 a second take at least 3.5 s from the first request to the last (3.9 s on the schedule), and no
    /// second holds more than the rate (one more allowed for a wake-up that came late).
    static func expectPaced(_ backend: FakeBackend, _ what: String) {
        let offsets = Self.offsets(backend)
        #expect(offsets.count == escrows, "\(what): every escrow delivered once: \(offsets.count)")
        #expect((offsets.last ?? 0) >= 3.5, "\(what): spread over \(offsets.last ?? 0) s")
        let busiest = busiestSecond(offsets)
        #expect(busiest <= rate + 1, "\(what): \(busiest) requests within one second")
        #expect(backend.violations.isEmpty, "\(what): \(backend.violations)")
    }

    @Test("serve at --delivery-rate 10: a backlog of 40 resumed reaches the backend over at least 3.5 s")
    func serveSpreadsABacklog() async throws {
        let cli = CLITests()
        await #expect(try cli.run(["keys", "init"]).status == 0)
        let token = try await cli.run(["tokens", "add", "rate", "--scope", "capture", "--scope", "read"])
        let bearer = token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        await #expect(try cli.run(["deliveries", "pause", "--reason", "backend outage"]).status == 0)
        let secret = WebhookSecret.generateText()
        let backend = try await FakeBackend.start(secret: secret)
        defer { Task { await backend.stop() } }
        backend.respond { _, _ in .status(200) }

        let port = try freePort()
        let processes = ProfileEscrowProcesses(
            directory: cli.directory.path,
            environment: [
                "PROFILE_ESCROW_DATABASE": cli.database, "PROFILE_ESCROW_KEYRING": cli.keyring,
                "PROFILE_ESCROW_WEBHOOK_SECRET": secret,
            ]
        )
        defer { processes.killAll() }
        try processes.start(
            "serve",
            [
                "serve", "--host", "127.0.0.1", "--port", "\(port)", "--backend", backend.url, "--concurrency", "8",
                "--poll-interval", "100ms", "--delivery-rate", "\(Self.rate)",
            ]
        )
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        defer { _ = http.shutdown() }
        try await waitUntilHealthy(http, port: port)
        let url = "http://127.0.0.1:\(port)"
        for number in 0..<Self.escrows {
            var request = HTTPClientRequest(url: url + "/v1/escrows")
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer \(bearer)")
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: CLITests.body(number)))
            let response = try await http.execute(request, timeout: .seconds(30))
            #expect(response.status == .created)
        }

        var status = HTTPClientRequest(url: url + "/v1/admin/deliveries")
        status.headers.add(name: "Authorization", value: "Bearer \(bearer)")
        let answer = try await http.execute(status, timeout: .seconds(30))
        let body = try await answer.body.collect(upTo: 1 << 16)
        let json = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
        #expect(json?["ratePerSecond"] as? Double == Double(Self.rate), "the admin API shows the rate: \(json ?? [:])")
        #expect(json?["paused"] as? Bool == true)
        #expect(backend.requests.isEmpty, "nothing delivered while paused")
        let shown = try await cli.run(["deliveries", "status"])
        #expect(shown.stdout.contains("rate: 10 a second for the cluster"), "\(shown.stdout)")

        await #expect(try cli.run(["deliveries", "resume", "--reason", "backend back"]).status == 0)
        try await eventually("40 deliveries", within: 60, every: .milliseconds(100)) {
            backend.requests.count >= Self.escrows
        }
        Self.expectPaced(backend, "serve")
    }

    @Test("two replay workers sharing one store at --delivery-rate 10 deliver 40 escrows at 10 a second together")
    func twoWorkersShareTheRate() async throws {
        let cli = CLITests()
        await #expect(try cli.run(["keys", "init"]).status == 0)
        for number in 0..<Self.escrows { await #expect(try cli.run(["capture"], stdin: CLITests.body(number)).status == 0) }
        let secret = WebhookSecret.generateText()
        let backend = try await FakeBackend.start(secret: secret)
        defer { Task { await backend.stop() } }
        backend.respond { _, _ in .status(200) }

        let arguments = [
            "replay", "--once", "--backend", backend.url, "--concurrency", "8", "--delivery-rate", "\(Self.rate)",
        ]
        async let first = Self.replay(cli, arguments + ["--worker-id", "first"], secret: secret)
        async let second = Self.replay(cli, arguments + ["--worker-id", "second"], secret: secret)
        let results = try await [first, second]
        for result in results { #expect(result.status == 0, "\(result.stderr)") }
        let delivered = results.map { Self.delivered($0.stdout) }
        #expect(delivered.reduce(0, +) == Self.escrows, "the two workers' summaries: \(delivered)")
        #expect(delivered.allSatisfy { $0 > 0 }, "both workers delivered: \(delivered)")
        Self.expectPaced(backend, "two workers")
    }

    static func replay(_ cli: CLITests, _ arguments: [String], secret: String) async throws -> ProfileEscrowCLI.Result {
        try await Task.detached {
            try await cli.run(arguments, environment: ["PROFILE_ESCROW_WEBHOOK_SECRET": secret])
        }.value
    }

    /// `delivered N: …` of a replay summary.
    static func delivered(_ summary: String) -> Int {
        guard let range = summary.range(of: "delivered ") else { return 0 }
        return Int(summary[range.upperBound...].prefix { $0.isNumber }) ?? 0
    }
}
