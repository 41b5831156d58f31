import EscrowCore
import EscrowCrypto
import EscrowPostgres
import EscrowTestSupport
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A `replay` worker on PostgreSQL killed with SIGKILL while the backend holds its deliveries open: another worker
/// redelivers each escrow once the dead worker's lease ran out, with the escrow's one Idempotency-Key; every escrow
/// is confirmed and purged exactly once, and the audit chain verifies.
@Suite("PostgreSQL: kill -9 of a replay worker mid-delivery")
struct ReplayKillTests {
    @Test func anotherWorkerRedeliversAfterTheLease() async throws {
        try await TestDatabase.with { database in
            let directory = TemporaryDirectory()
            let secret = try ProfileEscrowCLI.run(["webhook-secret"], in: directory.path).stdout
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let environment = [
                "PROFILE_ESCROW_DATABASE": database.url,
                "PROFILE_ESCROW_KEYRING": directory.path + "/keyring",
                "PROFILE_ESCROW_WEBHOOK_SECRET": secret,
            ]
            let initialized = try ProfileEscrowCLI.run(["keys", "init"], environment: environment, in: directory.path)
            #expect(initialized.status == 0, "\(initialized.stderr)")
            let count = 4
            var ids: [String] = []
            for number in 0..<count {
                let captured = try ProfileEscrowCLI.run(
                    ["capture"],
                    stdin: ServeKillTests.body(number),
                    environment: environment,
                    in: directory.path
                )
                #expect(captured.status == 0, "\(captured.stderr)")
                ids.append(try #require(captured.stdout.split(separator: "\n").last.map(String.init)))
            }

            let backend = try await HoldingBackend.start(secret: secret)
            let lease = 3.0
            func launch(_ name: String) throws -> Process {
                let process = Process()
                process.executableURL = ProfileEscrowCLI.binary
                process.arguments = [
                    "replay", "--backend", backend.url, "--concurrency", "\(count)", "--lease", "3s",
                    "--delivery-timeout", "2s", "--backoff-base", "50ms", "--backoff-max", "1s", "--poll-interval",
                    "100ms", "--worker-id", name, "--verbose",
                ]
                process.currentDirectoryURL = URL(fileURLWithPath: directory.path)
                process.environment = ProcessInfo.processInfo.environment.filter {
                    !$0.key.hasPrefix("PROFILE_ESCROW_")
                }.merging(environment) { $1 }
                let log = directory.path + "/\(name).log"
                _ = FileManager.default.createFile(atPath: log, contents: nil)
                let output = FileHandle(forWritingAtPath: log)
                process.standardOutput = output
                process.standardError = output
                try process.run()
                return process
            }

            // The first worker claims every escrow; the backend holds each request open; SIGKILL.
            let first = try launch("worker-killed")
            defer { if first.isRunning { kill(first.processIdentifier, SIGKILL) } }
            try await Self.eventually("the backend to hold every delivery", within: 60) {
                Set(backend.requests.compactMap(\.escrowID)).count == count
            }
            kill(first.processIdentifier, SIGKILL)
            first.waitUntilExit()
            #expect(first.terminationReason == .uncaughtSignal, "the worker was killed, not stopped")
            let held = backend.requests
            #expect(held.allSatisfy { $0.answered == false }, "no delivery of the killed worker was answered")
            backend.answerFromNowOn()

            // A second worker redelivers once the leases ran out.
            let second = try launch("worker-second")
            defer { if second.isRunning { kill(second.processIdentifier, SIGKILL) } }
            let store = try await database.open()
            try await Self.eventually("every escrow purged", within: 120) {
                try await allEvents(store).filter { $0.draft.type == .purged }.count >= count
            }
            kill(second.processIdentifier, SIGTERM)
            second.waitUntilExit()
            #expect(second.terminationReason == .exit && second.terminationStatus == 0)

            let requests = backend.requests
            #expect(requests.allSatisfy { $0.signatureValid }, "every delivery is signed with the webhook secret")
            let events = try await allEvents(store)
            for id in ids {
                let purges = events.filter { $0.draft.escrowID == id && $0.draft.type == .purged }
                #expect(purges.map(\.draft.detail) == ["confirmed"], "escrow \(id) purged exactly once, confirmed")
                let deliveries = requests.filter { $0.escrowID == id }
                #expect(deliveries.count >= 2, "escrow \(id) was redelivered")
                #expect(Set(deliveries.compactMap(\.idempotencyKey)) == [id], "one Idempotency-Key per escrow")
                #expect(deliveries.contains { $0.answered }, "escrow \(id) was confirmed by an answer")
                let heldAt = try #require(held.first { $0.escrowID == id }?.at)
                let redelivered = try #require(deliveries.first { $0.at > heldAt }?.at)
                #expect(
                    redelivered.timeIntervalSince(heldAt) >= lease - 0.5,
                    "redelivered only after the lease ran out: \(redelivered.timeIntervalSince(heldAt)) s"
                )
                #expect(try await store.record(id: try #require(EscrowID(hex: id))) == nil, "escrow \(id) purged")
            }
            var verifier = AuditChain.Verifier()
            for event in events { verifier.consume(event) }
            verifier.finish(head: try await store.auditHead())
            #expect(verifier.isIntact, "the audit chain verifies after the kill")
            await store.close()
            await backend.stop()

            let report = try ProfileEscrowCLI.run(
                ["purge-report", "--verify"],
                environment: environment,
                in: directory.path
            )
            #expect(report.status == 0, "purge-report --verify: \(report.stdout.suffix(400)) \(report.stderr)")
            for name in ["worker-killed", "worker-second"] {
                let log = try String(contentsOfFile: directory.path + "/\(name).log", encoding: .utf8)
                #expect(!log.isEmpty)
                // The database is named pgtest_…: the user identifiers are 000000.pgtest….
                #expect(
                    !log.contains("example.invalid") && !log.contains("000000.pgtest"),
                    "\(name) logged personal data"
                )
            }
        }
    }

    static func eventually(
        _ what: String,
        within seconds: Double,
        _ condition: () async throws -> Bool
    ) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("timed out waiting for \(what)")
        throw CancellationError()
    }
}

/// A real HTTP backend on 127.0.0.1: it records each delivery (its Idempotency-Key, its escrow id, whether its
/// webhook signature is right, recomputed here from the secret) and holds every request open, unanswered, until
/// told to answer; from then on it answers 200.
final class HoldingBackend: Sendable {
    struct Request: Sendable {
        var at: Date
        var idempotencyKey: String?
        var escrowID: String?
        var signatureValid: Bool
        var answered: Bool
    }

    private let state = NIOLockedValueBox((requests: [Request](), answering: false))
    private let key: [UInt8]
    private let channel: NIOLockedValueBox<(any Channel)?> = .init(nil)

    var url: String { "http://127.0.0.1:\(channel.withLockedValue { $0?.localAddress?.port ?? 0 })/register" }
    var requests: [Request] { state.withLockedValue { $0.requests } }

    private init(secret: String) {
        key = [UInt8](Data(base64Encoded: String(secret.dropFirst("whsec_".count))) ?? Data())
    }

    static func start(secret: String) async throws -> HoldingBackend {
        let backend = HoldingBackend(secret: secret)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler(backend: backend))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        backend.channel.withLockedValue { $0 = channel }
        return backend
    }

    func answerFromNowOn() { state.withLockedValue { $0.answering = true } }

    func stop() async { try? await channel.withLockedValue { $0 }?.close() }

    /// Records a request; true if it is to be answered.
    fileprivate func received(head: HTTPRequestHead, body: [UInt8]) -> Bool {
        var valid = false
        if let id = head.headers.first(name: "webhook-id"),
            let timestamp = head.headers.first(name: "webhook-timestamp"),
            let signature = head.headers.first(name: "webhook-signature")
        {
            let expected = Hashing.hmacSHA256(key: key, message: Array("\(id).\(timestamp).".utf8) + body)
            valid = signature.split(separator: " ").contains { entry in
                entry.hasPrefix("v1,")
                    && Data(base64Encoded: String(entry.dropFirst(3))).map { [UInt8]($0) } == expected
            }
        }
        let json = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
        return state.withLockedValue { state in
            state.requests.append(
                Request(
                    at: Date(),
                    idempotencyKey: head.headers.first(name: "idempotency-key"),
                    escrowID: json?["escrowId"] as? String,
                    signatureValid: valid,
                    answered: state.answering
                )
            )
            return state.answering
        }
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let backend: HoldingBackend
        var head: HTTPRequestHead?
        var body: [UInt8] = []

        init(backend: HoldingBackend) { self.backend = backend }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                self.head = head
                body = []
            case .body(let buffer):
                body += buffer.readableBytesView
            case .end:
                guard let head, backend.received(head: head, body: body) else { return }
                var headers = HTTPHeaders()
                headers.add(name: "Content-Length", value: "0")
                context.write(
                    wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .ok, headers: headers))),
                    promise: nil
                )
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }
}
