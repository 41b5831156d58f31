import EscrowCrypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A real HTTP backend on 127.0.0.1 (ephemeral port) for the replay worker: it checks every
/// request on its own (signature recomputed from the secret with HMAC-SHA256, headers against the
/// body), records it, and answers as its script says.
final class BackendStub: Sendable {
    /// One request as the stub saw it.
    struct Request: Sendable {
        var at: Date
        var method: String
        var path: String
        var contentType: String?
        var idempotencyKey: String?
        var webhookID: String?
        var webhookTimestamp: String?
        var signatureValid: Bool
        /// `escrowId` and `attempt` from the JSON body.
        var escrowID: String?
        var attempt: Int?
        var body: [UInt8]
        /// The webhook headers, to replay the delivery to another verifier.
        var webhookSignature: String?
    }

    /// How to answer one request.
    indirect enum Reply: Sendable {
        case status(Int, headers: [String: String] = [:])
        /// Answer after a pause (longer than the delivery timeout: the worker times out).
        case delayed(Double, Reply)
        /// Close the connection without an answer (a reset, as the worker sees it).
        case close
        /// The status line and headers at once, then a body of `bytes` bytes, one every `every`
        /// seconds: a backend (or proxy) that answers in time but takes ages to finish.
        case dripping(Int, headers: [String: String] = [:], every: Double, bytes: Int)
    }

    /// The answers sent, per escrow id: what the worker may have heard.
    struct Answered: Sendable {
        var key: String
        var status: Int?
    }

    private struct State {
        var requests: [Request] = []
        var answered: [Answered] = []
        var inFlight: Set<String> = []
        var mostAtOnce = 0
        var violations: [String] = []
        var script: @Sendable (Request, Int) -> Reply = { _, _ in .status(200) }
        var perKey: [String: Int] = [:]
    }

    private let state = NIOLockedValueBox(State())
    let secretText: String
    private let key: [UInt8]
    private let channel: any Channel

    var port: Int { channel.localAddress?.port ?? 0 }
    var url: String { "http://127.0.0.1:\(port)/register" }

    private init(secretText: String, channel: any Channel) {
        self.secretText = secretText
        self.key = [UInt8](Data(base64Encoded: String(secretText.dropFirst("whsec_".count))) ?? Data())
        self.channel = channel
    }

    static func start(secret: String) async throws -> BackendStub {
        let box = NIOLockedValueBox<BackendStub?>(nil)
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
        let stub = BackendStub(secretText: secret, channel: channel)
        box.withLockedValue { $0 = stub }
        return stub
    }

    func stop() async {
        try? await channel.close()
    }

    /// How to answer: given the request and how many requests came before it for the same escrow.
    func respond(_ script: @escaping @Sendable (Request, Int) -> Reply) {
        state.withLockedValue { $0.script = script }
    }

    var requests: [Request] { state.withLockedValue { $0.requests } }
    var answered: [Answered] { state.withLockedValue { $0.answered } }
    /// Signature failures, header mismatches, and one escrow in flight twice at once.
    var violations: [String] { state.withLockedValue { $0.violations } }
    /// The most requests that were in flight at once.
    var mostAtOnce: Int { state.withLockedValue { $0.mostAtOnce } }

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
        let request = Request(
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
            state.requests.append(request)
            let count = state.perKey[key, default: 0]
            state.perKey[key] = count + 1
            return (request, state.script(request, count))
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

        let stub: BackendStub
        var head: HTTPRequestHead?
        var body: [UInt8] = []
        /// The request waiting for a delayed answer, if any.
        var pending: Request?

        init(stub: BackendStub) { self.stub = stub }

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
