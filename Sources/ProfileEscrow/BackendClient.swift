import AsyncHTTPClient
import EscrowCore
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOSSL
import Tracing

/// POSTs one escrow to the registration backend and classifies the answer.
///
/// Redirects are never followed (a `3xx` is classified like any unexpected status: retry later);
/// TLS certificates are verified (async-http-client's default); every exchange, body included, has
/// one deadline.
struct BackendClient: Sendable {
    let http: HTTPClient
    let url: String
    let secrets: [WebhookSecret]
    /// The backend's host, for the delivery span (never its path or query).
    var host: String { URL(string: url)?.host ?? "" }

    /// The most of a response body read (and discarded) so the connection can be reused: only the
    /// status and `Retry-After` matter. Past it the connection is closed instead.
    static let maximumResponseBody = 16 * 1024

    /// A client for `configuration`, shut down when `body` returns.
    @discardableResult
    static func with<T>(
        _ configuration: ReplayWorker.Configuration,
        logger: Logger,
        _ body: (BackendClient) async throws -> T
    ) async throws -> T {
        let timeout = TimeAmount.milliseconds(Int64(configuration.deliveryTimeout * 1000))
        var httpConfiguration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: HTTPClient.Configuration.Timeout(connect: min(timeout, .seconds(10)), read: timeout),
            decompression: .disabled
        )
        httpConfiguration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = configuration.concurrency
        // The delivery's client span is ours (``deliver(body:escrowID:within:now:tracer:)``, with the escrow's tracer).
        // AsyncHTTPClient's own would take the process-wide tracer, a no-op here, yet still parse the URL again and
        // build its attributes for every request: about 2% of a replay's CPU.
        httpConfiguration.tracing.tracer = nil
        if var tls = configuration.backendTLS {
            // Whatever the caller set, the backend's certificate and name are verified.
            tls.certificateVerification = .fullVerification
            httpConfiguration.tlsConfiguration = tls
        }
        let http = HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup,
            configuration: httpConfiguration,
            backgroundActivityLogger: logger
        )
        let client = BackendClient(
            http: http,
            url: configuration.backendURL.absoluteString,
            secrets: configuration.webhookSecrets
        )
        let result: T
        do {
            result = try await body(client)
        } catch {
            try? await http.shutdown()
            throw error
        }
        try await http.shutdown()
        return result
    }

    /// What the backend answered, and for a failure without an answer, what went wrong (for logs).
    struct Answer: Sendable {
        var outcome: DeliveryOutcome
        var failure: String?
        /// No answer within the delivery timeout: the backend may still be working on the request.
        var timedOut = false
        /// The status line and headers came in time, but the deadline cut off reading the body. The
        /// status decides the outcome all the same (docs/replay.md, "Deadlines").
        var bodyCutOff = false
    }

    /// Sends `body` for `escrowID` and says what the backend answered, all within `seconds`: the
    /// request, the answer's head and the (bounded, discarded) body share this one deadline, so a
    /// backend that dribbles its answer cannot hold a delivery past it. Network failures and
    /// timeouts are `.retry(status: nil, …)`; this never throws.
    ///
    /// With a `tracer`, the exchange is a client span, and the request carries its W3C `traceparent` (and
    /// `tracestate`) so that the backend's trace continues it.
    func deliver(
        body: [UInt8],
        escrowID: String,
        within seconds: Double,
        now: Date,
        tracer: (any Tracer)? = nil
    ) async -> Answer {
        await EscrowTracing.withSpan(tracer, "POST", ofKind: .client) { span in
            span?.attributes["http.request.method"] = "POST"
            span?.attributes["server.address"] = host
            let answer = await send(body: body, escrowID: escrowID, within: seconds, now: now) { headers in
                tracer?.inject(.current ?? .topLevel, into: &headers, using: HTTPHeadersInjector())
            }
            if let status = answer.outcome.status {
                span?.attributes["http.response.status_code"] = status
                if status >= 500 { span?.setStatus(SpanStatus(code: .error)) }
            } else {
                span?.setStatus(SpanStatus(code: .error, message: answer.timedOut ? "timed out" : "no answer"))
            }
            return answer
        }
    }

    private func send(
        body: [UInt8],
        escrowID: String,
        within seconds: Double,
        now: Date,
        propagate: (inout HTTPHeaders) -> Void
    ) async -> Answer {
        let timestamp = Int64(now.timeIntervalSince1970.rounded(.down))
        var headers = HTTPHeaders()
        headers.reserveCapacity(8)
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Idempotency-Key", value: escrowID)
        headers.add(name: "webhook-id", value: escrowID)
        headers.add(name: "webhook-timestamp", value: String(timestamp))
        headers.add(
            name: "webhook-signature",
            value: WebhookSignature.header(secrets: secrets, id: escrowID, timestamp: timestamp, body: body)
        )
        headers.add(name: "User-Agent", value: "ProfileEscrow-replay/1")
        propagate(&headers)
        let request: HTTPClient.Request
        do {
            request = try HTTPClient.Request(url: url, method: .POST, headers: headers, body: .bytes(body))
        } catch {
            return Answer(
                outcome: .retry(status: nil, retryAfter: nil),
                failure: String(describing: error).prefix(200).description
            )
        }

        let budget = TimeAmount.milliseconds(Int64(max(0, seconds) * 1000))
        let deadline = NIODeadline.now() + budget
        // async-http-client's response delegate, on the connection's event loop, rather than its async API: the
        // answer's head and body parts come to `Exchange` where they arrive, and only the finished answer hops back
        // to the delivery's task. The async API added a task of its own per delivery (so a timer could cancel it),
        // an async sequence for the body, and a hop back to Swift's pool for each of its parts.
        let exchange = Exchange(sentAt: now)
        let task = http.execute(request: request, delegate: exchange, deadline: deadline)
        // The one deadline over the whole exchange, however the answer comes (a body dribbled a byte at a time
        // restarts the read timeout with every byte): a timer on the task's event loop fails the request, which
        // closes its connection at once; it is removed when the exchange ends.
        let timer = task.eventLoop.scheduleTask(deadline: deadline) {
            task.fail(reason: HTTPClientError.deadlineExceeded)
        }
        let result: Result<Answer, any Error>
        do {
            result = .success(
                try await withTaskCancellationHandler {
                    try await task.futureResult.get()
                } onCancel: {
                    task.cancel()
                }
            )
        } catch {
            result = .failure(error)
        }
        timer.cancel()
        switch result {
        case .success(let answer):
            return answer
        case .failure(let error):
            // The deadline ended it: our timer, or async-http-client's own when it came first.
            let pastDeadline = (error as? HTTPClientError) == .deadlineExceeded
            if var head = exchange.state.withLockedValue({ $0.head }) {
                // The status has decided; the body was only read so the connection could be reused.
                head.bodyCutOff = pastDeadline
                return head
            }
            if pastDeadline {
                return Answer(
                    outcome: .retry(status: nil, retryAfter: nil),
                    failure: "no answer within the delivery deadline",
                    timedOut: true
                )
            }
            // async-http-client's errors name the failure (connectTimeout, remoteConnectionClosed, connection
            // refused…), never the request body.
            return Answer(
                outcome: .retry(status: nil, retryAfter: nil),
                failure: String(describing: error).prefix(200).description,
                timedOut: (error as? HTTPClientError) == .readTimeout
            )
        }
    }

    /// One exchange's response, read where it arrives: the answer's head (which decides the outcome), then at most
    /// ``maximumResponseBody`` bytes of body, read and discarded so the connection can be reused (past it the
    /// request fails, which closes the connection, and the head's answer stands).
    final class Exchange: HTTPClientResponseDelegate, Sendable {
        typealias Response = Answer

        struct State {
            var head: Answer?
            var bodyRead = 0
        }

        struct BodyTooLarge: Error {}

        let sentAt: Date
        let state = NIOLockedValueBox(State())

        init(sentAt: Date) { self.sentAt = sentAt }

        func didReceiveHead(task: HTTPClient.Task<Answer>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
            let retryAfter = RetryAfter.seconds(head.headers.first(name: "Retry-After"), now: sentAt)
            let outcome = DeliveryOutcome.classify(status: Int(head.status.code), retryAfter: retryAfter)
            let answer = Answer(outcome: outcome)
            state.withLockedValue { $0.head = answer }
            return task.eventLoop.makeSucceededVoidFuture()
        }

        func didReceiveBodyPart(task: HTTPClient.Task<Answer>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
            let tooLarge = state.withLockedValue {
                $0.bodyRead += buffer.readableBytes
                return $0.bodyRead > BackendClient.maximumResponseBody
            }
            return tooLarge ? task.eventLoop.makeFailedFuture(BodyTooLarge()) : task.eventLoop.makeSucceededVoidFuture()
        }

        func didFinishRequest(task: HTTPClient.Task<Answer>) throws -> Answer {
            guard let head = state.withLockedValue({ $0.head }) else { throw HTTPClientError.remoteConnectionClosed }
            return head
        }
    }
}

/// Writes a propagated trace context (`traceparent`, `tracestate`) into a request's headers.
struct HTTPHeadersInjector: Injector {
    func inject(_ value: String, forKey key: String, into headers: inout HTTPHeaders) {
        headers.replaceOrAdd(name: key, value: value)
    }
}
