import AsyncHTTPClient
import EscrowCore
import EscrowCrypto
import EscrowPostgres
import EscrowTestSupport
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A `serve` node (with its replay worker) whose way to PostgreSQL goes through a proxy the test cuts off silently:
/// connections stay open, nothing passes, no FIN, no RST. Every capture still gets an answer within the store's
/// bound (`store_unavailable`), `/readyz` answers `503` within 2 s, and once the network is back the node captures
/// again without a restart; every capture it acknowledged is in the database.
@Suite("PostgreSQL: a silent network partition")
struct PartitionTests {
    /// The store's bound in this test (`--store-timeout`), in seconds.
    static let bound = 2.0
    /// Slack on top of the bound for a loaded two-core machine (the HTTP round trip, the node's scheduling). The
    /// partition lasts far longer than the bound and the slack together: an operation that waits for the network
    /// instead of its bound fails the test.
    static let slack = 2.0
    static let partition = 14.0

    @Test func everyAnswerComesWithinItsBoundAndTheNodeRecovers() async throws {
        try await TestDatabase.with { database in
            let directory = TemporaryDirectory()
            var url = try #require(URLComponents(string: database.url))
            let proxy = try PartitionProxy(to: "127.0.0.1", port: try #require(url.port))
            defer { proxy.stop() }
            url.port = proxy.port
            let environment = [
                "PROFILE_ESCROW_DATABASE": try #require(url.string),
                "PROFILE_ESCROW_KEYRING": directory.path + "/keyring",
                "PROFILE_ESCROW_STORE_TIMEOUT": "\(Self.bound)",
                "PROFILE_ESCROW_WEBHOOK_SECRET": "whsec_" + Data(repeating: 7, count: 32).base64EncodedString(),
            ]
            let token = try await ProfileEscrowCLI.setUpCaptureNode(
                token: "partition.pgtest",
                environment: environment,
                in: directory.path
            )
            let port = try freePort()
            let processes = ProfileEscrowProcesses(directory: directory.path, environment: environment)
            defer { processes.killAll() }
            _ = try processes.start(
                "serve",
                [
                    "serve", "--host", "127.0.0.1", "--port", "\(port)", "--rate-limit", "100000", "--rate-burst",
                    "100000", "--backend", "http://127.0.0.1:9/register", "--poll-interval", "0.2s",
                ]
            )
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { _ = client.shutdown() }
            // Probes on a client of their own: the captures' client lends at most 8 connections to one host, and a
            // probe queued behind 8 stuck captures would measure the client, not the node.
            let prober = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { _ = prober.shutdown() }
            try await waitUntilHealthy(client, port: port)
            let acknowledged = NIOLockedValueBox<[String]>([])

            // Before: captures are acknowledged, the node is ready.
            for number in 0..<5 {
                let answer = await Self.capture(client, port: port, token: token, number: number)
                #expect(answer.status == .created, "capture before the partition: \(answer.status)")
                if let id = answer.id { acknowledged.withLockedValue { $0.append(id) } }
            }
            #expect(await Self.ready(client, port: port).status == .ok)

            // The partition: captures in waves while it lasts, and probes.
            proxy.blackhole()
            let cut = ContinuousClock.now
            let slowest = NIOLockedValueBox<(capture: Double, ready: Double)>((0, 0))
            let statuses = NIOLockedValueBox<[HTTPResponseStatus: Int]>([:])
            let readyStatuses = NIOLockedValueBox<[HTTPResponseStatus: Int]>([:])
            try await withThrowingTaskGroup(of: Void.self) { group in
                for wave in 0..<4 {
                    for one in 0..<8 {
                        group.addTask {
                            try await pause(for: .seconds(Double(wave) * 2.5))
                            let answer = await Self.capture(
                                client,
                                port: port,
                                token: token,
                                number: 100 + wave * 8 + one
                            )
                            slowest.withLockedValue { $0.capture = max($0.capture, answer.seconds) }
                            statuses.withLockedValue { $0[answer.status, default: 0] += 1 }
                            if answer.status == .created, let id = answer.id {
                                acknowledged.withLockedValue { $0.append(id) }
                            }
                        }
                    }
                }
                group.addTask {
                    while ContinuousClock.now - cut < .seconds(Self.partition - 1) {
                        let answer = await Self.ready(prober, port: port)
                        slowest.withLockedValue { $0.ready = max($0.ready, answer.seconds) }
                        readyStatuses.withLockedValue { $0[answer.status, default: 0] += 1 }
                        try await pause(for: .milliseconds(500))
                    }
                }
                try await group.waitForAll()
            }
            let during = slowest.withLockedValue { $0 }
            print(
                "partition of \(Self.partition) s, bound \(Self.bound) s: slowest capture \(during.capture) s, slowest "
                    + "/readyz \(during.ready) s; captures \(statuses.withLockedValue { $0 }), probes "
                    + "\(readyStatuses.withLockedValue { $0 })"
            )
            #expect(
                during.capture <= Self.bound + Self.slack,
                "the slowest capture answered after \(during.capture) s in a \(Self.partition) s partition"
            )
            #expect(during.ready <= 2.0 + Self.slack / 2, "the slowest /readyz answered after \(during.ready) s")
            let captured = statuses.withLockedValue { $0 }
            #expect(captured[.serviceUnavailable, default: 0] > 0, "captures during the partition: \(captured)")
            #expect(
                captured.keys.allSatisfy { $0 == .serviceUnavailable || $0 == .created },
                "captures during the partition: \(captured)"
            )
            let probed = readyStatuses.withLockedValue { $0 }
            #expect(probed[.serviceUnavailable, default: 0] > 0, "/readyz during the partition: \(probed)")
            #expect(probed[.ok, default: 0] <= 1, "/readyz said ready during the partition: \(probed)")

            // Healed: the node captures again and says ready, without a restart.
            try await pause(for: ContinuousClock.now.duration(to: cut + .seconds(Self.partition)))
            proxy.heal()
            var number = 200
            try await eventually(
                "a capture and /readyz 200 within 30 s of the network's return",
                within: 30,
                every: .milliseconds(250)
            ) {
                number += 1
                let answer = await Self.capture(client, port: port, token: token, number: number)
                guard answer.status == .created, let id = answer.id else { return false }
                acknowledged.withLockedValue { $0.append(id) }
                return await Self.ready(client, port: port).status == .ok
            }
            #expect(processes.signal("serve", SIGTERM)?.terminationStatus == 0, "serve stopped cleanly")

            let store = try await database.open()
            for id in acknowledged.withLockedValue({ $0 }) {
                let found = try await store.record(id: try #require(EscrowID(hex: id)))
                #expect(found != nil, "acknowledged escrow \(id) is missing")
            }
            await store.close()
        }
    }

    struct Answer {
        var status: HTTPResponseStatus
        var id: String?
        var seconds: Double
    }

    static func capture(_ client: HTTPClient, port: Int, token: String, number: Int) async -> Answer {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/escrows")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: ServeKillTests.body(number)))
        return await send(client, request)
    }

    static func ready(_ client: HTTPClient, port: Int) async -> Answer {
        await send(client, HTTPClientRequest(url: "http://127.0.0.1:\(port)/readyz"))
    }

    /// The answer and how long it took; a request that got no answer within 60 s counts as 60 s.
    static func send(_ client: HTTPClient, _ request: HTTPClientRequest) async -> Answer {
        let start = ContinuousClock.now
        let seconds = { (ContinuousClock.now - start) / .seconds(1) }
        guard let response = try? await client.execute(request, timeout: .seconds(60)),
            let body = try? await response.body.collect(upTo: 65_536)
        else { return Answer(status: .gatewayTimeout, id: nil, seconds: max(60, seconds())) }
        let json = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
        return Answer(status: response.status, id: json?["escrowId"] as? String, seconds: seconds())
    }
}
