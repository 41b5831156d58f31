import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A real HTTP server on 127.0.0.1 (ephemeral port) answering every request with what its `answer` says at that
/// moment: a stand-in for a document server such as Apple's JWKS endpoint. Counts the requests.
public final class StaticHTTPServer: Sendable {
    /// One answer: status, headers and body; `delay` seconds before it is sent.
    public struct Answer: Sendable {
        public var status: Int
        public var headers: [(String, String)]
        public var body: [UInt8]
        public var delay: Double

        public init(status: Int = 200, headers: [(String, String)] = [], body: [UInt8] = [], delay: Double = 0) {
            self.status = status
            self.headers = headers
            self.body = body
            self.delay = delay
        }
    }

    private let state: NIOLockedValueBox<(answer: Answer, requests: [String])>
    private let channel: any Channel

    public var port: Int { channel.localAddress?.port ?? 0 }
    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }
    /// The paths requested, in order.
    public var requests: [String] { state.withLockedValue { $0.requests } }

    public func answer(_ answer: Answer) { state.withLockedValue { $0.answer = answer } }

    private init(state: NIOLockedValueBox<(answer: Answer, requests: [String])>, channel: any Channel) {
        self.state = state
        self.channel = channel
    }

    public static func start(_ answer: Answer) async throws -> StaticHTTPServer {
        let state = NIOLockedValueBox((answer: answer, requests: [String]()))
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler(state: state))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return StaticHTTPServer(state: state, channel: channel)
    }

    public func stop() async {
        try? await channel.close()
    }

    private final class Handler: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let state: NIOLockedValueBox<(answer: Answer, requests: [String])>

        init(state: NIOLockedValueBox<(answer: Answer, requests: [String])>) { self.state = state }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else {
                if case .head(let head) = unwrapInboundIn(data) {
                    state.withLockedValue { $0.requests.append(head.uri) }
                }
                return
            }
            let answer = state.withLockedValue { $0.answer }
            var headers = HTTPHeaders(answer.headers)
            headers.replaceOrAdd(name: "Content-Length", value: "\(answer.body.count)")
            let head = HTTPResponseHead(
                version: .http1_1,
                status: HTTPResponseStatus(statusCode: answer.status),
                headers: headers
            )
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            let send: @Sendable () -> Void = {
                let context = bound.value
                context.write(NIOAny(HTTPServerResponsePart.head(head)), promise: nil)
                context.write(
                    NIOAny(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: answer.body)))),
                    promise: nil
                )
                context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
            }
            if answer.delay > 0 {
                context.eventLoop.scheduleTask(in: .milliseconds(Int64(answer.delay * 1000))) { send() }
            } else {
                send()
            }
        }
    }
}
