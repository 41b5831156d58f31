import EscrowCore
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

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
    /// When the current phase's deadline passes; nil while the service is answering.
    private var deadline: NIODeadline?
    /// The one timer of the connection, and when it fires. It is not moved at every phase: a request would
    /// otherwise schedule and cancel two timers (in a profile of `serve` under load this handler's share of a capture's
    /// CPU went from 4.3% to 1.7%). A timer
    /// that fires before the deadline schedules itself again for the rest; one that finds no deadline ends.
    private var timer: Scheduled<Void>?
    private var timerFiresAt: NIODeadline?

    init(deadlines: Deadlines) {
        self.deadlines = deadlines
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(deadlines.head, context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        if deadline == nil, state == .awaitingHead { arm(deadlines.head, context: context) }
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        disarm()
    }

    func channelInactive(context: ChannelHandlerContext) {
        state = .closed
        disarm()
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
                deadline = nil  // the timer, if it fires meanwhile, finds no deadline and ends
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
        disarm()
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

    /// Starts a phase that must end within `amount`. The timer is rescheduled only when it would fire after the new
    /// deadline.
    private func arm(_ amount: TimeAmount, context: ChannelHandlerContext) {
        let end = NIODeadline.now() + amount
        deadline = end
        if let firesAt = timerFiresAt, firesAt <= end { return }
        schedule(at: end, context: context)
    }

    private func schedule(at end: NIODeadline, context: ChannelHandlerContext) {
        timer?.cancel()
        timerFiresAt = end
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: end) {
            let (handler, context) = loopBound.value
            handler.timerFired(context: context)
        }
    }

    /// Ends the timer for good (the connection is closing, or the handler leaves it).
    private func disarm() {
        deadline = nil
        timer?.cancel()
        timer = nil
        timerFiresAt = nil
    }

    private func timerFired(context: ChannelHandlerContext) {
        timer = nil
        timerFiresAt = nil
        guard let deadline else { return }
        if NIODeadline.now() < deadline {
            schedule(at: deadline, context: context)
        } else {
            expired(context: context)
        }
    }

    private func expired(context: ChannelHandlerContext) {
        deadline = nil
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
