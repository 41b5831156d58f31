import EscrowCore
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Tracing

/// POSTs one escrow to the registration backend and classifies the answer.
///
/// Redirects are never followed (a `3xx` is classified like any unexpected status: retry later);
/// TLS certificates are verified in full; every exchange, body included, has one deadline.
///
/// Written on NIO's bootstrap, HTTP/1.1 codec and TLS handler rather than on async-http-client, for speed: a
/// delivery is one small POST whose answer only its status matters, and async-http-client's general machinery
/// (its pool and request state machines on both sides of the hop to the event loop, head and body written in
/// two flushes) cost 65 µs of CPU per delivery, a third of a purge; with this client a purge costs 15–17% less
/// (docs/performance.md, "Replay: a client written for the one exchange"). What is ours is only what the one
/// exchange needs: the pool of kept-alive connections (``BackendConnections``) and the exchange
/// (``BackendExchangeHandler``).
struct BackendClient: Sendable {
    let connections: BackendConnections
    let secrets: [WebhookSecret]
    /// The backend's host, for the delivery span (never its path or query).
    let host: String
    /// The `Host` header: the host, with the port when it is not the scheme's.
    let authority: String
    /// The request target: the URL's path (`/` when empty) and query, as given (percent-encoded).
    let target: String

    /// The most of a response body read (and discarded) so the connection can be reused: only the
    /// status and `Retry-After` matter. Past it the connection is closed instead.
    static let maximumResponseBody = 16 * 1024

    /// Why an exchange had no answer (for the delivery's log line: never the request or its body).
    enum Failure: Error, Equatable, CustomStringConvertible {
        /// No status line within the delivery deadline.
        case deadline
        /// No connection: `refused` when the backend's host answered that nothing listens on the port.
        case connect(String, refused: Bool)
        /// The TLS handshake failed or TLS alerted (an unknown CA, a wrong name, an expired certificate).
        case tls(String)
        /// The backend closed the connection without answering.
        case closedBeforeAnswer
        /// The connection was lost without an answer: a reset, a broken pipe.
        case connectionLost(String)
        /// An answer that is not HTTP/1.1, or another failure of the exchange itself.
        case exchange(String)
        case shuttingDown

        /// The connection was closed or lost with nothing received: on a kept-alive connection, the request may
        /// never have reached the backend.
        var lostUnanswered: Bool {
            switch self {
            case .closedBeforeAnswer, .connectionLost: true
            default: false
            }
        }

        var description: String {
            switch self {
            case .deadline: "no answer within the delivery deadline"
            case .connect(let error, _): "cannot connect to the backend: \(error)"
            case .tls(let error): "TLS with the backend failed: \(error)"
            case .closedBeforeAnswer: "the backend closed the connection without answering"
            case .connectionLost(let error): "the connection to the backend was lost without an answer: \(error)"
            case .exchange(let error): "the exchange with the backend failed: \(error)"
            case .shuttingDown: "the worker is shutting down"
            }
        }
    }

    /// `idleTimeout`: how long a kept-alive connection may stay unused (tests shorten it).
    init(
        url: URL,
        tls configured: TLSConfiguration?,
        secrets: [WebhookSecret],
        idleTimeout: TimeAmount = BackendExchangeHandler.defaultIdleTimeout
    ) throws(EscrowError) {
        let secure = url.scheme?.lowercased() == "https"
        guard let given = url.host, !given.isEmpty else {
            throw EscrowError(.invalidConfiguration, "the backend URL must be an http:// or https:// URL with a host")
        }
        // Foundation gives an IPv6 address with or without its brackets, depending on the version.
        let host = given.hasPrefix("[") && given.hasSuffix("]") ? String(given.dropFirst().dropLast()) : given
        let isAddress = (try? SocketAddress(ipAddress: host, port: 0)) != nil
        let port = url.port ?? (secure ? 443 : 80)
        let context = try Self.tlsContext(for: url, configured: configured)
        self.connections = BackendConnections(
            endpoint: BackendConnections.Endpoint(
                host: host,
                port: port,
                tls: context,
                serverHostname: secure && !isAddress ? host : nil
            ),
            idleTimeout: idleTimeout
        )
        self.secrets = secrets
        self.host = host
        let bracketed = host.contains(":") ? "[\(host)]" : host
        self.authority = url.port == nil || url.port == (secure ? 443 : 80) ? bracketed : "\(bracketed):\(port)"
        let path = url.path(percentEncoded: true)
        let query = url.query(percentEncoded: true).map { "?\($0)" } ?? ""
        self.target = (path.isEmpty ? "/" : path) + query
    }

    /// The TLS context for an `https` backend (nil for `http`): whatever the caller set, the backend's certificate
    /// and name are verified, and HTTP/1.1 is the one protocol offered.
    static func tlsContext(for url: URL, configured: TLSConfiguration?) throws(EscrowError) -> NIOSSLContext? {
        guard url.scheme?.lowercased() == "https" else { return nil }
        var tls = configured ?? TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .fullVerification
        tls.applicationProtocols = ["http/1.1"]
        do {
            return try NIOSSLContext(configuration: tls)
        } catch {
            throw EscrowError(.invalidConfiguration, "the TLS settings toward the backend cannot be used: \(error)")
        }
    }

    /// A client for `configuration`, its connections closed when `body` returns.
    @discardableResult
    static func with<T>(
        _ configuration: ReplayWorker.Configuration,
        _ body: (BackendClient) async throws -> T
    ) async throws -> T {
        let client = try BackendClient(
            url: configuration.backendURL,
            tls: configuration.backendTLS,
            secrets: configuration.webhookSecrets
        )
        let result: T
        do {
            result = try await body(client)
        } catch {
            await client.connections.shutdown()
            throw error
        }
        await client.connections.shutdown()
        return result
    }

    /// What the backend answered, and for a failure without an answer, what went wrong (for logs).
    struct Answer: Sendable {
        var outcome: DeliveryOutcome
        var failure: String?
        /// Why there was no answer, classified (for a test delivery's answer).
        var cause: Failure?
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
        let deadline = NIODeadline.now() + .milliseconds(Int64(max(0, seconds) * 1000))
        let timestamp = Int64(now.timeIntervalSince1970.rounded(.down))
        var headers = HTTPHeaders()
        headers.reserveCapacity(10)
        headers.add(name: "Host", value: authority)
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(body.count))
        headers.add(name: "Idempotency-Key", value: escrowID)
        headers.add(name: "webhook-id", value: escrowID)
        headers.add(name: "webhook-timestamp", value: String(timestamp))
        headers.add(
            name: "webhook-signature",
            value: WebhookSignature.header(secrets: secrets, id: escrowID, timestamp: timestamp, body: body)
        )
        headers.add(name: "User-Agent", value: "ProfileEscrow-replay/1")
        propagate(&headers)

        let head = HTTPRequestHead(version: .http1_1, method: .POST, uri: target, headers: headers)
        let bytes = ByteBuffer(bytes: body)
        while true {
            let connection: BackendConnections.Connection
            do {
                connection = try await connections.take(before: deadline)
            } catch {
                return Answer(outcome: .retry(status: nil, retryAfter: nil), failure: error.description, cause: error)
            }
            let result = await exchange(head, bytes, on: connection, deadline: deadline, sentAt: now)
            switch result {
            case .success(let ended):
                connections.giveBack(connection, reusable: ended.reusable)
                return ended.answer
            case .failure(let failure):
                connections.giveBack(connection, reusable: false)
                // A kept-alive connection that turned out closed as the request went out (the backend's keep-alive
                // timeout met it on the way), with nothing received: the same request again at once, on another
                // connection, within the same deadline. As Go's HTTP client does for a request that carries an
                // `Idempotency-Key`: the backend may have read it, and deduplicates by that key. Ends, as each
                // turn uses up an idle connection or opens a new one, which is not reused.
                if connection.reused, failure.lostUnanswered, !Task.isCancelled, NIODeadline.now() < deadline {
                    continue
                }
                return Answer(
                    outcome: .retry(status: nil, retryAfter: nil),
                    failure: String(failure.description.prefix(200)),
                    cause: failure,
                    timedOut: failure == .deadline
                )
            }
        }
    }

    /// One exchange on `connection`: its answer, or why there was none.
    private func exchange(
        _ head: HTTPRequestHead,
        _ body: ByteBuffer,
        on connection: BackendConnections.Connection,
        deadline: NIODeadline,
        sentAt: Date
    ) async -> Result<BackendExchange.Ended, Failure> {
        let channel = connection.channel
        let promise = channel.eventLoop.makePromise(of: BackendExchange.Ended.self)
        let exchange = BackendExchange(head: head, body: body, deadline: deadline, sentAt: sentAt, promise: promise)
        let handler = connection.handler
        channel.eventLoop.execute { handler.value.start(exchange) }
        do {
            return .success(
                try await withTaskCancellationHandler {
                    try await promise.futureResult.get()
                } onCancel: {
                    channel.close(promise: nil)
                }
            )
        } catch {
            return .failure(error as? Failure ?? .exchange(String(describing: error)))
        }
    }
}

/// Writes a propagated trace context (`traceparent`, `tracestate`) into a request's headers.
struct HTTPHeadersInjector: Injector {
    func inject(_ value: String, forKey key: String, into headers: inout HTTPHeaders) {
        headers.replaceOrAdd(name: key, value: value)
    }
}
