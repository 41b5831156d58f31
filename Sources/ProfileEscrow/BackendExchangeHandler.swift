import EscrowCore
import Foundation
import NIOCore
import NIOHTTP1

/// One request to the backend, handed to a connection's ``BackendExchangeHandler``.
struct BackendExchange: Sendable {
    var head: HTTPRequestHead
    var body: ByteBuffer
    /// The one deadline over the exchange (the handshake of a new TLS connection included).
    var deadline: NIODeadline
    /// When the request went out, for a `Retry-After` given as a date.
    var sentAt: Date
    var promise: EventLoopPromise<Ended>

    /// How an exchange ended with an answer.
    struct Ended: Sendable {
        var answer: BackendClient.Answer
        /// The whole answer was read and the backend keeps the connection open: the next delivery may use it.
        var reusable: Bool
    }
}

/// The last handler of a backend connection's pipeline (after TLS and NIO's HTTP/1.1 codec): it writes one
/// request at a time, reads the answer where it arrives, on the connection's event loop, and completes the
/// exchange's promise once, with the answer or with why there was none.
///
/// - The status line and headers decide the outcome. The body is only read, at most
///   ``BackendClient/maximumResponseBody`` bytes of it, so that the connection can be reused; past that the
///   connection is closed and the status stands.
/// - A timer at the exchange's deadline ends it: with the status when it came (the body cut off), otherwise as a
///   timeout. Either way the connection is closed, so nothing of a late answer is read as the next one's.
/// - Informational answers (`1xx`) are dropped by NIO's decoder before they reach this handler.
/// - An answer nobody asked for, or a connection idle for ``idleTimeout``, closes the connection.
final class BackendExchangeHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private struct InFlight {
        var promise: EventLoopPromise<BackendExchange.Ended>
        var sentAt: Date
        var timer: Scheduled<Void>
        var answer: BackendClient.Answer?
        var keepAlive = false
        var bodyRead = 0
    }

    /// How long a kept-alive connection may stay unused before it is closed (as async-http-client's pool does).
    static let idleTimeout = TimeAmount.seconds(60)

    private var inFlight: InFlight?
    private var idleTimer: Scheduled<Void>?
    private var context: ChannelHandlerContext?
    /// What ended the connection while no exchange was in flight (a TLS handshake refused before the first
    /// request was handed over, a reset while it was idle): the next exchange's failure says it.
    private var endedBy: BackendClient.Failure?

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        idleTimer?.cancel()
        idleTimer = nil
        end(context: context, reusable: false, failure: endedBy ?? .closedBeforeAnswer)
        self.context = nil
    }

    /// Writes `exchange`'s request (head, body and end in one flush: one `writev` on the socket) and arms its
    /// deadline. On the connection's event loop.
    func start(_ exchange: BackendExchange) {
        guard inFlight == nil, let context, context.channel.isActive else {
            exchange.promise.fail(endedBy ?? .closedBeforeAnswer)
            return
        }
        idleTimer?.cancel()
        idleTimer = nil
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let timer = context.eventLoop.scheduleTask(deadline: exchange.deadline) {
            let (handler, context) = bound.value
            handler.deadlinePassed(context: context)
        }
        inFlight = InFlight(promise: exchange.promise, sentAt: exchange.sentAt, timer: timer)
        context.write(wrapOutboundOut(.head(exchange.head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(exchange.body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard var current = inFlight else {
            // Bytes nobody asked for: this connection's framing cannot be trusted any more.
            context.close(promise: nil)
            return
        }
        switch unwrapInboundIn(data) {
        case .head(let head):
            let retryAfter = RetryAfter.seconds(head.headers.first(name: "Retry-After"), now: current.sentAt)
            current.answer = BackendClient.Answer(
                outcome: DeliveryOutcome.classify(status: Int(head.status.code), retryAfter: retryAfter)
            )
            current.keepAlive = head.isKeepAlive
            inFlight = current
        case .body(let part):
            current.bodyRead += part.readableBytes
            inFlight = current
            if current.bodyRead > BackendClient.maximumResponseBody {
                end(context: context, reusable: false)
            }
        case .end:
            end(context: context, reusable: current.keepAlive)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        idleTimer?.cancel()
        idleTimer = nil
        // A status that came stands (the body was cut short); otherwise there was no answer.
        end(context: context, reusable: false, failure: .closedBeforeAnswer)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // TLS, a reset, an answer that is not HTTP/1.1: the connection is done for.
        let said = String(describing: error)
        // A socket error (a reset, a broken pipe) says the connection was lost; anything else (TLS, HTTP parsing)
        // that the exchange itself failed.
        let failure: BackendClient.Failure = error is IOError ? .connectionLost(said) : .exchange(said)
        if inFlight == nil, endedBy == nil { endedBy = failure }
        end(context: context, reusable: false, failure: failure)
        context.close(promise: nil)
    }

    private func deadlinePassed(context: ChannelHandlerContext) {
        guard inFlight != nil else { return }
        inFlight?.answer?.bodyCutOff = true
        end(context: context, reusable: false, failure: .deadline)
    }

    /// Completes the exchange in flight, if any: with its answer when the status came, otherwise with `failure`.
    /// A connection that cannot carry the next exchange is closed; one that can closes itself when left idle.
    private func end(
        context: ChannelHandlerContext,
        reusable: Bool,
        failure: BackendClient.Failure = .closedBeforeAnswer
    ) {
        guard let current = inFlight else { return }
        inFlight = nil
        current.timer.cancel()
        let reusable = reusable && context.channel.isActive
        if reusable {
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            idleTimer = context.eventLoop.scheduleTask(in: Self.idleTimeout) {
                bound.value.close(promise: nil)
            }
        } else {
            context.close(promise: nil)
        }
        if let answer = current.answer {
            current.promise.succeed(BackendExchange.Ended(answer: answer, reusable: reusable))
        } else {
            current.promise.fail(failure)
        }
    }
}
