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
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Idempotency-Key", value: escrowID)
        request.headers.add(name: "webhook-id", value: escrowID)
        request.headers.add(name: "webhook-timestamp", value: String(timestamp))
        request.headers.add(
            name: "webhook-signature",
            value: WebhookSignature.header(secrets: secrets, id: escrowID, timestamp: timestamp, body: body)
        )
        request.headers.add(name: "User-Agent", value: "ProfileEscrow-replay/1")
        propagate(&request.headers)
        request.body = .bytes(body)

        let budget = TimeAmount.milliseconds(Int64(max(0, seconds) * 1000))
        let deadline = NIODeadline.now() + budget
        // The answer as soon as its head is in: what the deadline leaves when it cuts the body off.
        let heard = Heard()
        let prepared = request
        // The one deadline over the whole exchange (async-http-client's own deadline stops applying once the
        // head is in, and its read timeout restarts with every chunk): a timer on the client's event loop
        // cancels the exchange, which cancels the request and closes its connection at once. A task and a
        // NIO timer that is removed when the exchange ends, rather than a task group racing `Task.sleep`,
        // whose timer would stay queued in Dispatch for the whole delivery timeout after every delivery.
        let exchange = Task { await self.exchange(prepared, deadline: deadline, sentAt: now, heard: heard) }
        let timer = http.eventLoopGroup.any().scheduleTask(deadline: deadline) {
            heard.state.withLockedValue { if !$0.finished { $0.cutOff = true } }
            exchange.cancel()
        }
        let answer = await withTaskCancellationHandler {
            await exchange.value
        } onCancel: {
            exchange.cancel()
        }
        timer.cancel()
        let (cutOff, head) = heard.state.withLockedValue { ($0.cutOff, $0.head) }
        guard cutOff else { return answer }
        if var answer = head {
            answer.bodyCutOff = true
            return answer
        }
        return Answer(
            outcome: .retry(status: nil, retryAfter: nil),
            failure: "no answer within the delivery deadline",
            timedOut: true
        )
    }

    /// The request, then its answer's head (which decides the outcome), then at most
    /// ``maximumResponseBody`` bytes of body, read and discarded so the connection can be reused.
    private func exchange(
        _ request: HTTPClientRequest,
        deadline: NIODeadline,
        sentAt now: Date,
        heard: Heard
    ) async -> Answer {
        defer { heard.state.withLockedValue { $0.finished = true } }
        do {
            let response = try await http.execute(request, deadline: deadline)
            let status = Int(response.status.code)
            let retryAfter = RetryAfter.seconds(response.headers.first(name: "Retry-After"), now: now)
            let answer = Answer(outcome: DeliveryOutcome.classify(status: status, retryAfter: retryAfter))
            heard.state.withLockedValue { $0.head = answer }
            // The status has decided; the body is drained (bounded) only so the connection can be
            // reused. Too large, or a failure while reading it: the connection is closed instead.
            var read = 0
            do {
                for try await chunk in response.body {
                    read += chunk.readableBytes
                    if read > Self.maximumResponseBody { break }
                }
            } catch {}
            return answer
        } catch {
            // async-http-client's errors name the failure (deadlineExceeded, connectTimeout,
            // remoteConnectionClosed, connection refused…), never the request body.
            let timedOut = (error as? HTTPClientError).map { $0 == .deadlineExceeded || $0 == .readTimeout } ?? false
            return Answer(
                outcome: .retry(status: nil, retryAfter: nil),
                failure: String(describing: error).prefix(200).description,
                timedOut: timedOut
            )
        }
    }

    /// What the exchange and its deadline share: the answer as soon as its head came in, whether the exchange
    /// finished, and whether the deadline cut it off first.
    final class Heard: Sendable {
        struct State {
            var head: Answer?
            var finished = false
            var cutOff = false
        }

        let state = NIOLockedValueBox(State())
    }
}

/// Writes a propagated trace context (`traceparent`, `tracestate`) into a request's headers.
struct HTTPHeadersInjector: Injector {
    func inject(_ value: String, forKey key: String, into headers: inout HTTPHeaders) {
        headers.replaceOrAdd(name: key, value: value)
    }
}
