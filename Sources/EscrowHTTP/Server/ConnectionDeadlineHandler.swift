import EscrowCore
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import ProfileEscrow

/// Per-connection deadlines that no Hummingbird 2.28 or NIO option gives: Hummingbird's `idleTimeout`
/// (NIO's `IdleStateHandler` underneath) restarts on every byte read, so a client that dribbles a body
/// one byte every few seconds, or its headers (slowloris), holds the connection forever.
///
/// - **Head**: a request head must be complete within `head` of the connection opening or of the end of
///   the previous response. This also closes idle keep-alive connections.
/// - **Body**: a request's body must be complete within `body` of its head: one total deadline, never
///   restarted by a byte.
///
/// On a missed deadline the request (if any) sees ``ConnectionDeadlineExceeded`` (answered `408`) and the
/// connection is closed. Between a request's end and its response's end there is no deadline: the
/// service itself is working.
///
/// It also answers an HTTP parse error that arrives before any request (a malformed request line or
/// header) with a `400` problem+json body, where Hummingbird would send an empty one. A parse error in
/// the middle of a body goes on to the route, whose body read throws it (a `400` from `ProblemMiddleware`).
final class ConnectionDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    struct Deadlines: Sendable, Equatable {
        var head: TimeAmount
        var body: TimeAmount
    }

    private enum State {
        /// Waiting for a request head (a new connection, or one kept alive after a response).
        case awaitingHead
        /// A head arrived; waiting for the end of its body.
        case readingBody
        /// The request is complete; the service is answering it.
        case responding
        case closed
    }

    private let deadlines: Deadlines
    private var state = State.awaitingHead
    /// The connection's one timer; its phase ends at the current deadline, none while the service is answering.
    private var timer = PhaseTimer()

    init(deadlines: Deadlines) {
        self.deadlines = deadlines
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(deadlines.head, context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        if timer.phaseEnds == nil, state == .awaitingHead { arm(deadlines.head, context: context) }
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer.disarm()
    }

    func channelInactive(context: ChannelHandlerContext) {
        state = .closed
        timer.disarm()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            state = .readingBody
            arm(deadlines.body, context: context)
        case .body:
            break  // The body deadline is total: a byte never restarts it.
        case .end:
            if state == .readingBody {
                state = .responding
                timer.pause()  // the timer, if it fires meanwhile, finds no deadline
            }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data), state == .responding {
            state = .awaitingHead
            arm(deadlines.head, context: context)
        }
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard error is HTTPParserError, state == .awaitingHead else {
            context.fireErrorCaught(error)
            return
        }
        // No request is in flight: answer here with a problem body, then close.
        state = .closed
        timer.disarm()
        var buffer = context.channel.allocator.buffer(capacity: Self.malformedBody.count)
        buffer.writeBytes(Self.malformedBody)
        let head = HTTPResponse(
            status: .badRequest,
            headerFields: [
                .contentType: "application/problem+json", .cacheControl: "no-store", .connection: "close",
                .contentLength: "\(Self.malformedBody.count)",
            ]
        )
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(buffer)), promise: nil)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in loopBound.value.close(promise: nil) }
    }

    /// The problem `ProblemMiddleware` would write for a malformed request.
    static let malformedBody = Array(
        JSONResponse.encode([
            "type": .string("urn:profile-escrow:problem:malformed_request"), "title": .string("Bad Request"),
            "status": .integer(400), "code": .string("malformed_request"),
            "detail": .string("the request is not valid HTTP/1.1"),
        ])
    )

    /// Starts a phase that must end within `amount`.
    private func arm(_ amount: TimeAmount, context: ChannelHandlerContext) {
        timer.arm(until: .now() + amount, on: context.eventLoop) {
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            return {
                let (handler, context) = loopBound.value
                if handler.timer.fired(on: context.eventLoop) { handler.expired(context: context) }
            }
        }
    }

    private func expired(context: ChannelHandlerContext) {
        let wasReading = state == .readingBody
        guard state == .awaitingHead || wasReading else { return }
        state = .closed
        // The route reading the body sees why it ended; then the connection goes.
        if wasReading { context.fireErrorCaught(ConnectionDeadlineExceeded()) }
        context.close(promise: nil)
    }
}

/// A request's head or body did not arrive within its connection deadline.
struct ConnectionDeadlineExceeded: Error, CustomStringConvertible {
    var description: String { "ConnectionDeadlineExceeded" }
}
