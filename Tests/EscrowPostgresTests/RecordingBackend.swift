import EscrowCrypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A real registration backend on 127.0.0.1 for the multi-process tests. It records every delivery (when, its
/// escrow id, its Idempotency-Key, whether its webhook signature is right, recomputed here from the secret) and
/// answers each as its policy says at that moment: a status, no answer at all (held open), or a closed connection.
final class RecordingBackend: Sendable {
    enum Answer: Sendable, Equatable {
        case status(Int)
        /// The request is held open, unanswered.
        case hold
        /// The connection is closed without an answer.
        case close
    }

    struct Delivery: Sendable {
        var at: Date
        var escrowID: String?
        var idempotencyKey: String?
        var signatureValid: Bool
        var answer: Answer
    }

    typealias Policy = @Sendable () -> Answer

    private let recorded = NIOLockedValueBox([Delivery]())
    private let policy: NIOLockedValueBox<Policy>
    private let key: [UInt8]
    private let channel = NIOLockedValueBox<(any Channel)?>(nil)

    var url: String { "http://127.0.0.1:\(channel.withLockedValue { $0?.localAddress?.port ?? 0 })/register" }
    var deliveries: [Delivery] { recorded.withLockedValue { $0 } }

    private init(secret: String, policy: @escaping Policy) {
        key = [UInt8](Data(base64Encoded: String(secret.dropFirst("whsec_".count))) ?? Data())
        self.policy = NIOLockedValueBox(policy)
    }

    static func start(secret: String, policy: @escaping Policy) async throws -> RecordingBackend {
        let backend = RecordingBackend(secret: secret, policy: policy)
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

    /// From now on, deliveries are answered as `policy` says.
    func answer(with policy: @escaping Policy) { self.policy.withLockedValue { $0 = policy } }

    /// 200, except for `failureRate` of the deliveries, picked at random: a 500, a 503 or a closed connection.
    static func chaos(failureRate: Double) -> Policy {
        {
            Double.random(in: 0..<1) >= failureRate
                ? .status(200) : [.status(500), .status(503), .close].randomElement()!
        }
    }

    func stop() async { try? await channel.withLockedValue { $0 }?.close() }

    /// Records a delivery and decides its answer.
    fileprivate func received(head: HTTPRequestHead, body: [UInt8]) -> Answer {
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
        let answer = policy.withLockedValue { $0 }()
        recorded.withLockedValue {
            $0.append(
                Delivery(
                    at: Date(),
                    escrowID: json?["escrowId"] as? String,
                    idempotencyKey: head.headers.first(name: "idempotency-key"),
                    signatureValid: valid,
                    answer: answer
                )
            )
        }
        return answer
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let backend: RecordingBackend
        var head: HTTPRequestHead?
        var body: [UInt8] = []

        init(backend: RecordingBackend) { self.backend = backend }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                self.head = head
                body = []
            case .body(let buffer):
                body += buffer.readableBytesView
            case .end:
                guard let head else { return }
                switch backend.received(head: head, body: body) {
                case .hold: return
                case .close: context.close(promise: nil)
                case .status(let status):
                    var headers = HTTPHeaders()
                    headers.add(name: "Content-Length", value: "0")
                    let response = HTTPResponseHead(
                        version: head.version,
                        status: HTTPResponseStatus(statusCode: status),
                        headers: headers
                    )
                    context.write(wrapOutboundOut(.head(response)), promise: nil)
                    context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                }
            }
        }
    }
}
