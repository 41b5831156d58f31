import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
public import NIOSSL

/// A server on 127.0.0.1 (ephemeral port) that answers each HTTP/1.1 request with the exact bytes its script
/// gives, optionally over TLS: for what an HTTP client must survive that a well-behaved server library will not
/// send (informational answers, `Connection: close` on a connection left open, an HTTP/1.0 answer, oversized or
/// malformed answers). It frames requests itself (headers, then `Content-Length` bytes) and records them.
public final class WireHTTPServer: Sendable {
    /// How to answer one request.
    public struct Wire: Sendable {
        /// Written as they are.
        public var bytes: [UInt8]
        /// Close the connection after writing them.
        public var close: Bool

        public init(_ text: String, close: Bool = false) {
            self.bytes = Array(text.utf8)
            self.close = close
        }

        public init(bytes: [UInt8], close: Bool = false) {
            self.bytes = bytes
            self.close = close
        }

        /// A `200` with an empty body, the connection kept.
        public static let ok = Wire("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        /// Nothing at all: the request is left unanswered.
        public static let silence = Wire(bytes: [])
    }

    /// One request as it came: its connection (numbered from 1 in order of accept), request line and headers.
    public struct Received: Sendable {
        public var connection: Int
        public var head: String
        public var body: [UInt8]

        /// The value of header `name` (case-insensitive), if present.
        public func header(_ name: String) -> String? {
            for line in head.split(separator: "\r\n").dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                if line[..<colon].lowercased() == name.lowercased() {
                    return line[line.index(after: colon)...].trimmingPrefix(" ").description
                }
            }
            return nil
        }
    }

    /// Given the request's number (from 0, over all connections).
    public typealias Script = @Sendable (Int) -> Wire

    private struct State {
        var script: Script
        var received: [Received] = []
        var accepted = 0
        var open: [Int: any Channel] = [:]
    }

    private let state: NIOLockedValueBox<State>
    private let channel: any Channel

    public var port: Int { channel.localAddress?.port ?? 0 }
    public var received: [Received] { state.withLockedValue { $0.received } }
    /// Connections accepted so far.
    public var accepted: Int { state.withLockedValue { $0.accepted } }
    /// Connections still open.
    public var openConnections: Int { state.withLockedValue { $0.open.count } }

    private init(state: NIOLockedValueBox<State>, channel: any Channel) {
        self.state = state
        self.channel = channel
    }

    /// Listens on 127.0.0.1; with `tls`, speaks TLS on every connection.
    public static func start(tls: TLSConfiguration? = nil, _ script: @escaping Script) async throws -> WireHTTPServer {
        let state = NIOLockedValueBox(State(script: script))
        let context = try tls.map { try NIOSSLContext(configuration: $0) }
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let number = state.withLockedValue { state in
                        state.accepted += 1
                        state.open[state.accepted] = channel
                        return state.accepted
                    }
                    channel.closeFuture.whenComplete { _ in state.withLockedValue { $0.open[number] = nil } }
                    if let context {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    }
                    try channel.pipeline.syncOperations.addHandler(Handler(state: state, connection: number))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return WireHTTPServer(state: state, channel: channel)
    }

    /// Answers from now on as `script` says.
    public func respond(_ script: @escaping Script) {
        state.withLockedValue { $0.script = script }
    }

    /// Closes every open connection (a keep-alive timeout on the server's side).
    public func closeConnections() async {
        let open = state.withLockedValue { Array($0.open.values) }
        for channel in open { try? await channel.close() }
    }

    public func stop() async {
        await closeConnections()
        try? await channel.close()
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        let state: NIOLockedValueBox<State>
        let connection: Int
        var buffered: [UInt8] = []

        init(state: NIOLockedValueBox<State>, connection: Int) {
            self.state = state
            self.connection = connection
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            buffered += buffer.readBytes(length: buffer.readableBytes) ?? []
            while let request = nextRequest() {
                let wire = state.withLockedValue { state in
                    let number = state.received.count
                    state.received.append(request)
                    return state.script(number)
                }
                if !wire.bytes.isEmpty {
                    let bytes = context.channel.allocator.buffer(bytes: wire.bytes)
                    context.writeAndFlush(wrapOutboundOut(bytes), promise: nil)
                }
                if wire.close {
                    context.close(promise: nil)
                    return
                }
            }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }

        /// One whole request off the front of what came, if there is one.
        private func nextRequest() -> Received? {
            let end = Array("\r\n\r\n".utf8)
            guard let headEnd = buffered.indices.first(where: { buffered[$0...].starts(with: end) }) else {
                return nil
            }
            let head = String(decoding: buffered[..<headEnd], as: UTF8.self)
            var request = Received(connection: connection, head: head, body: [])
            let length = request.header("Content-Length").flatMap { Int($0) } ?? 0
            let bodyStart = headEnd + end.count
            guard buffered.count >= bodyStart + length else { return nil }
            request.body = Array(buffered[bodyStart..<bodyStart + length])
            buffered.removeFirst(bodyStart + length)
            return request
        }
    }
}
