import EscrowCore
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL

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
/// - The exchange's deadline ends it: with the status when it came (the body cut off), otherwise as a timeout.
///   Either way the connection is closed, so nothing of a late answer is read as the next one's.
/// - Informational answers (`1xx`) are dropped by NIO's decoder before they reach this handler.
/// - An answer nobody asked for, or a connection idle for ``idleTimeout``, closes the connection.
final class BackendExchangeHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private struct InFlight {
        var promise: EventLoopPromise<BackendExchange.Ended>
        var sentAt: Date
        var answer: BackendClient.Answer?
        var keepAlive = false
        var bodyRead = 0
    }

    /// How long a kept-alive connection may stay unused before it is closed, by default (as async-http-client's
    /// pool does).
    static let defaultIdleTimeout = TimeAmount.seconds(60)

    let idleTimeout: TimeAmount

    private var inFlight: InFlight?
    /// The connection's one timer (``PhaseTimer``): its phase ends at the exchange's deadline, or at the end of
    /// the idle time allowed.
    private var timer = PhaseTimer()
    private var context: ChannelHandlerContext?
    /// What ended the connection while no exchange was in flight (a TLS handshake refused before the first
    /// request was handed over, a reset while it was idle): the next exchange's failure says it.
    private var endedBy: BackendClient.Failure?

    init(idleTimeout: TimeAmount = defaultIdleTimeout) {
        self.idleTimeout = idleTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer.disarm()
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
        inFlight = InFlight(promise: exchange.promise, sentAt: exchange.sentAt)
        arm(until: exchange.deadline, context: context)
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
        timer.disarm()
        // A status that came stands (the body was cut short); otherwise there was no answer.
        end(context: context, reusable: false, failure: .closedBeforeAnswer)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // The connection is done for. A socket error (a reset, a broken pipe) says it was lost, a TLS error that TLS
        // failed, anything else (an answer that is not HTTP/1.1) that the exchange itself failed.
        let said = String(describing: error)
        let failure: BackendClient.Failure =
            switch error {
            case is IOError: .connectionLost(said)
            case is NIOSSLError, is NIOSSLExtraError, is BoringSSLError: .tls(said)
            default: .exchange(said)
            }
        if inFlight == nil, endedBy == nil { endedBy = failure }
        end(context: context, reusable: false, failure: failure)
        context.close(promise: nil)
    }

    /// Starts a phase that ends at `end`.
    private func arm(until end: NIODeadline, context: ChannelHandlerContext) {
        timer.arm(until: end, on: context.eventLoop) {
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            return {
                let (handler, context) = bound.value
                if handler.timer.fired(on: context.eventLoop) { handler.phaseEnded(context: context) }
            }
        }
    }

    private func phaseEnded(context: ChannelHandlerContext) {
        if inFlight != nil {
            // The deadline: the status stands if it came, the body cut off.
            inFlight?.answer?.bodyCutOff = true
            end(context: context, reusable: false, failure: .deadline)
        } else {
            // Idle for ``idleTimeout``.
            context.close(promise: nil)
        }
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
        let reusable = reusable && context.channel.isActive
        if reusable {
            arm(until: .now() + idleTimeout, context: context)
        } else {
            timer.disarm()
            context.close(promise: nil)
        }
        if let answer = current.answer {
            current.promise.succeed(BackendExchange.Ended(answer: answer, reusable: reusable))
        } else {
            current.promise.fail(failure)
        }
    }
}
