import EscrowCrypto
public import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A real registration backend on 127.0.0.1 (ephemeral port) for the replay worker, in process or in a
/// `replay` process: it checks every request on its own (signature recomputed from the secret with
/// HMAC-SHA256, headers against the body), records it, and answers as its script says.
public final class FakeBackend: Sendable {
    /// One request as the backend saw it.
    public struct Request: Sendable {
        public var at: Date
        public var method: String
        public var path: String
        public var contentType: String?
        public var idempotencyKey: String?
        public var webhookID: String?
        public var webhookTimestamp: String?
        public var signatureValid: Bool
        /// `escrowId` and `attempt` from the JSON body.
        public var escrowID: String?
        public var attempt: Int?
        public var body: [UInt8]
        /// The webhook headers, to replay the delivery to another verifier.
        public var webhookSignature: String?
        /// How the script said to answer it (nil while the script decides).
        public internal(set) var reply: Reply?
    }

    /// How to answer one request.
    public indirect enum Reply: Sendable, Equatable {
        case status(Int, headers: [String: String] = [:])
        /// Answer after a pause (longer than the delivery timeout: the worker times out).
        case delayed(Double, Reply)
        /// Close the connection without an answer (a reset, as the worker sees it).
        case close
        /// Hold the request open, unanswered, until the client hangs up (a worker killed mid-delivery).
        case hold
        /// The status line and headers at once, then a body of `bytes` bytes, one every `every`
        /// seconds: a backend (or proxy) that answers in time but takes ages to finish.
        case dripping(Int, headers: [String: String] = [:], every: Double, bytes: Int)
    }

    /// A script's answer: given the request and how many requests came before it for the same escrow.
    public typealias Script = @Sendable (Request, Int) -> Reply

    /// 200, except for `failureRate` of the requests, picked at random: a 500, a 503 or a closed connection.
    public static func chaos(failureRate: Double) -> Script {
        let failures: [Reply] = [.status(500), .status(503), .close]
        return { _, _ in Double.random(in: 0..<1) >= failureRate ? .status(200) : failures.randomElement()! }
    }

    /// The answers sent, per escrow id: what the worker may have heard.
    public struct Answered: Sendable {
        public var key: String
        public var status: Int?
    }

    private struct State {
        var requests: [Request] = []
        var answered: [Answered] = []
        var inFlight: Set<String> = []
        var mostAtOnce = 0
        var violations: [String] = []
        var script: Script = { _, _ in .status(200) }
        var perKey: [String: Int] = [:]
    }

    private let state = NIOLockedValueBox(State())
    public let secretText: String
    private let key: [UInt8]
    private let channel: any Channel

    public var port: Int { channel.localAddress?.port ?? 0 }
    public var url: String { "http://127.0.0.1:\(port)/register" }

    private init(secretText: String, channel: any Channel) {
        self.secretText = secretText
        self.key = [UInt8](Data(base64Encoded: String(secretText.dropFirst("whsec_".count))) ?? Data())
        self.channel = channel
    }

    /// Listens on an ephemeral port of 127.0.0.1; answers 200 until told otherwise (``respond(_:)``).
    public static func start(secret: String) async throws -> FakeBackend {
        let box = NIOLockedValueBox<FakeBackend?>(nil)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard let stub = box.withLockedValue({ $0 }) else { throw ChannelError.ioOnClosedChannel }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler(stub: stub))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let stub = FakeBackend(secretText: secret, channel: channel)
        box.withLockedValue { $0 = stub }
        return stub
    }

    public func stop() async {
        try? await channel.close()
    }

    /// How to answer from now on: given the request and how many requests came before it for the same escrow.
    public func respond(_ script: @escaping Script) {
        state.withLockedValue { $0.script = script }
    }

    public var requests: [Request] { state.withLockedValue { $0.requests } }
    public var answered: [Answered] { state.withLockedValue { $0.answered } }
    /// Signature failures, header mismatches, and one escrow in flight twice at once.
    public var violations: [String] { state.withLockedValue { $0.violations } }
    /// The most requests that were in flight at once.
    public var mostAtOnce: Int { state.withLockedValue { $0.mostAtOnce } }

    // MARK: Handling

    fileprivate func received(head: HTTPRequestHead, body: [UInt8]) -> (Request, Reply) {
        let headers = head.headers
        let id = headers.first(name: "webhook-id")
        let timestamp = headers.first(name: "webhook-timestamp")
        let signature = headers.first(name: "webhook-signature")
        var valid = false
        if let id, let timestamp, let signature {
            // Computed here from the secret, independently of the worker's code.
            let expected = Hashing.hmacSHA256(key: key, message: Array("\(id).\(timestamp).".utf8) + body)
            let given = signature.split(separator: " ").compactMap { entry -> [UInt8]? in
                guard entry.hasPrefix("v1,") else { return nil }
                return Data(base64Encoded: String(entry.dropFirst(3))).map { [UInt8]($0) }
            }
            valid = given.contains(expected)
        }
        let json = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
        var request = Request(
            at: Date(),
            method: "\(head.method)",
            path: head.uri,
            contentType: headers.first(name: "content-type"),
            idempotencyKey: headers.first(name: "idempotency-key"),
            webhookID: id,
            webhookTimestamp: timestamp,
            signatureValid: valid,
            escrowID: json?["escrowId"] as? String,
            attempt: json?["attempt"] as? Int,
            body: body,
            webhookSignature: signature
        )
        return state.withLockedValue { state in
            let key = request.idempotencyKey ?? "-"
            if !valid { state.violations.append("bad signature for \(key)") }
            if request.idempotencyKey != request.escrowID || request.webhookID != request.escrowID {
                state.violations.append("headers and body disagree for \(key)")
            }
            if request.contentType != "application/json" {
                state.violations.append("content type \(request.contentType ?? "-")")
            }
            if !state.inFlight.insert(key).inserted { state.violations.append("\(key) in flight twice at once") }
            state.mostAtOnce = max(state.mostAtOnce, state.inFlight.count)
            let count = state.perKey[key, default: 0]
            state.perKey[key] = count + 1
            let reply = state.script(request, count)
            request.reply = reply
            state.requests.append(request)
            return (request, reply)
        }
    }

    /// The answer went out (`heard`: on a connection still open) or the client hung up first.
    fileprivate func done(_ request: Request, status: Int?, heard: Bool) {
        state.withLockedValue { state in
            let key = request.idempotencyKey ?? "-"
            state.inFlight.remove(key)
            if heard { state.answered.append(Answered(key: key, status: status)) }
        }
    }

    /// The status line went out on an open connection; the body is still to come (`dripping`).
    fileprivate func headSent(_ request: Request, status: Int) {
        state.withLockedValue { $0.answered.append(Answered(key: request.idempotencyKey ?? "-", status: status)) }
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        let stub: FakeBackend
        var head: HTTPRequestHead?
        var body: [UInt8] = []
        /// The request waiting for a delayed answer, if any.
        var pending: Request?

        init(stub: FakeBackend) { self.stub = stub }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                self.head = head
                body = []
            case .body(var buffer):
                body += buffer.readBytes(length: buffer.readableBytes) ?? []
            case .end:
                guard let head else { return }
                let (request, reply) = stub.received(head: head, body: body)
                answer(reply, request: request, keepAlive: head.isKeepAlive, context: context)
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            // The client gave up (its delivery timeout) before a delayed answer: no longer in flight.
            if let pending {
                stub.done(pending, status: nil, heard: false)
                self.pending = nil
            }
            context.fireChannelInactive()
        }

        private func answer(_ reply: Reply, request: Request, keepAlive: Bool, context: ChannelHandlerContext) {
            switch reply {
            case .status(let status, let extra):
                var headers = HTTPHeaders([("Content-Length", "0")])
                for (name, value) in extra { headers.add(name: name, value: value) }
                if !keepAlive { headers.add(name: "Connection", value: "close") }
                let head = HTTPResponseHead(
                    version: .http1_1,
                    status: HTTPResponseStatus(statusCode: status),
                    headers: headers
                )
                pending = nil
                stub.done(request, status: status, heard: context.channel.isActive)
                guard context.channel.isActive else { return }
                context.write(wrapOutboundOut(.head(head)), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                if !keepAlive { context.close(promise: nil) }
            case .delayed(let seconds, let then):
                pending = request
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: .milliseconds(Int64(seconds * 1000))) {
                    let (handler, context) = loopBound.value
                    guard handler.pending != nil else { return }  // the client hung up meanwhile
                    handler.answer(then, request: request, keepAlive: keepAlive, context: context)
                }
            case .hold:
                // In flight until the client hangs up (``channelInactive(context:)``).
                pending = request
            case .close:
                pending = nil
                stub.done(request, status: nil, heard: false)
                context.close(promise: nil)
            case .dripping(let status, let extra, let interval, let count):
                var headers = HTTPHeaders([("Content-Length", "\(count)")])
                for (name, value) in extra { headers.add(name: name, value: value) }
                if !keepAlive { headers.add(name: "Connection", value: "close") }
                guard context.channel.isActive else {
                    stub.done(request, status: nil, heard: false)
                    return
                }
                // Still in flight until the last byte went out or the client hung up.
                pending = request
                stub.headSent(request, status: status)
                let head = HTTPResponseHead(
                    version: .http1_1,
                    status: HTTPResponseStatus(statusCode: status),
                    headers: headers
                )
                context.writeAndFlush(wrapOutboundOut(.head(head)), promise: nil)
                drip(left: count, every: interval, request: request, keepAlive: keepAlive, context: context)
            }
        }

        /// One byte of a `dripping` body every `interval`, then the end; stops when the client hangs up.
        private func drip(
            left: Int,
            every interval: Double,
            request: Request,
            keepAlive: Bool,
            context: ChannelHandlerContext
        ) {
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: .milliseconds(Int64(interval * 1000))) {
                let (handler, context) = loopBound.value
                guard handler.pending != nil, context.channel.isActive else { return }
                var byte = context.channel.allocator.buffer(capacity: 1)
                byte.writeString(" ")
                context.writeAndFlush(handler.wrapOutboundOut(.body(.byteBuffer(byte))), promise: nil)
                if left > 1 {
                    handler.drip(
                        left: left - 1,
                        every: interval,
                        request: request,
                        keepAlive: keepAlive,
                        context: context
                    )
                    return
                }
                handler.pending = nil
                handler.stub.done(request, status: nil, heard: false)
                context.writeAndFlush(handler.wrapOutboundOut(.end(nil)), promise: nil)
                if !keepAlive { context.close(promise: nil) }
            }
        }
    }
}
