import AsyncHTTPClient
import Benchmark
import EscrowCore
import EscrowCrypto
import EscrowSQLite
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ProfileEscrow

// MARK: - Replay end to end: claim, open, sign, POST, classify, purge + audit; beside a raw floor

/// Escrows delivered per iteration, and deliveries in flight (the `replay --once --concurrency` of the docs).
let replayBatch = 2_000
let replayConcurrency = 64

func replayEndToEndBenchmarks() {
    let backend = Box<InstantBackend>()
    let ours = Box<Escrow>()
    Benchmark(
        "Replay end to end, \(replayBatch) escrows, \(replayConcurrency) in flight (ours)",
        configuration: configuration(iterations: 5, seconds: 60)
    ) { benchmark in
        for _ in benchmark.scaledIterations {
            benchmark.stopMeasurement()
            let escrow = try Fixtures.escrow(
                path: Fixtures.temporaryDirectory() + "/escrow.sqlite",
                checkpointAfterPurge: false
            )
            for number in 0..<replayBatch { _ = try await escrow.capture(try Fixtures.profile(number)) }
            var worker = try ReplayWorker.Configuration(
                backendURL: backend.value!.url,
                webhookSecret: WebhookSecret.generateText()
            )
            worker.concurrency = replayConcurrency
            let replay = try ReplayWorker(escrow: escrow, configuration: worker, logger: Fixtures.logger)
            benchmark.startMeasurement()
            let summary = try await replay.runOnce()
            benchmark.stopMeasurement()
            precondition(summary.confirmed == replayBatch, "\(summary)")
            ours.value = escrow
        }
    } setup: {
        backend.value = try await InstantBackend.start()
    } teardown: {
        try await backend.value?.stop()
        ours.value = nil
    }

    let floorBackend = Box<InstantBackend>()
    Benchmark(
        "Replay end to end, \(replayBatch) escrows, \(replayConcurrency) in flight (floor)",
        configuration: configuration(iterations: 5, seconds: 60)
    ) { benchmark in
        for _ in benchmark.scaledIterations {
            benchmark.stopMeasurement()
            let floor = Floor(path: Fixtures.temporaryDirectory() + "/floor.sqlite")
            floor.insert((0..<replayBatch).map { floor.seal(user: Fixtures.userIdentifier($0)) })
            let http = HTTPClient(eventLoopGroupProvider: .singleton)
            let url = floorBackend.value!.url
            benchmark.startMeasurement()
            // The same work with raw parts: read and open each row (raw libsodium), POST the same bytes with the
            // same HTTP client, then delete each batch with one audit row per escrow in one transaction.
            for start in stride(from: 0, to: replayBatch, by: replayConcurrency) {
                let users = (start..<min(start + replayConcurrency, replayBatch)).map(Fixtures.userIdentifier)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for user in users {
                        let row = floor.load(user: user)!
                        precondition(floor.open(row))
                        group.addTask { try await InstantBackend.post(floor.plaintext, to: url, with: http) }
                    }
                    try await group.waitForAll()
                }
                floor.purge(users: users)
            }
            benchmark.stopMeasurement()
            try await http.shutdown()
        }
    } setup: {
        floorBackend.value = try await InstantBackend.start()
    } teardown: {
        try await floorBackend.value?.stop()
    }
}

/// A registration backend that answers `200` at once: the replay pipeline's own cost is what is measured.
/// (Written with NIO directly: an HTTP server with nothing else in it.)
final class InstantBackend: Sendable {
    let channel: any Channel
    var url: String { "http://127.0.0.1:\(channel.localAddress!.port!)/register" }

    private init(channel: any Channel) { self.channel = channel }

    static func start() async throws -> InstantBackend {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap { channel.pipeline.addHandler(Answer()) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return InstantBackend(channel: channel)
    }

    func stop() async throws { try await channel.close() }

    /// The floor's delivery: the bytes POSTed as JSON with the same HTTP client as the worker's, the answer read.
    static func post(_ bytes: [UInt8], to url: String, with http: HTTPClient) async throws {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: bytes))
        let response = try await http.execute(request, timeout: .seconds(30))
        _ = try await response.body.collect(upTo: 1 << 16)
    }

    private final class Answer: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            var head = HTTPResponseHead(version: .http1_1, status: .ok)
            head.headers.add(name: "Content-Length", value: "0")
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
