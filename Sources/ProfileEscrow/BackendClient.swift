import AsyncHTTPClient
import EscrowCore
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// POSTs one escrow to the registration backend (SPEC §7) and classifies the answer.
///
/// Redirects are never followed (a `3xx` is classified like any unexpected status: retry later);
/// TLS certificates are verified (async-http-client's default); every request has a deadline.
struct BackendClient: Sendable {
    let http: HTTPClient
    let url: String
    let secret: WebhookSecret
    let timeout: Double

    /// The largest response body read (and discarded) so the connection can be reused.
    static let maximumResponseBody = 64 * 1024

    /// A client for `configuration`, shut down when `body` returns.
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
        let http = HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup,
            configuration: httpConfiguration,
            backgroundActivityLogger: logger
        )
        let client = BackendClient(
            http: http,
            url: configuration.backendURL.absoluteString,
            secret: configuration.webhookSecret,
            timeout: configuration.deliveryTimeout
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
    }

    /// Sends `body` for `escrowID` and says what the backend answered. Network failures and
    /// timeouts are `.retry(status: nil, …)`; this never throws.
    func deliver(body: [UInt8], escrowID: String, now: Date = Date()) async -> Answer {
        let timestamp = Int64(now.timeIntervalSince1970.rounded(.down))
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Idempotency-Key", value: escrowID)
        request.headers.add(name: "webhook-id", value: escrowID)
        request.headers.add(name: "webhook-timestamp", value: String(timestamp))
        request.headers.add(
            name: "webhook-signature",
            value: WebhookSignature.header(secret: secret, id: escrowID, timestamp: timestamp, body: body)
        )
        request.headers.add(name: "User-Agent", value: "ProfileEscrow-replay/1")
        request.body = .bytes(body)
        let deadline = NIODeadline.now() + .milliseconds(Int64(timeout * 1000))
        do {
            let response = try await http.execute(request, deadline: deadline)
            let status = Int(response.status.code)
            let retryAfter = RetryAfter.seconds(response.headers.first(name: "Retry-After"), now: Date())
            // Drain (bounded) so the connection can be reused; the status has decided already.
            _ = try? await response.body.collect(upTo: Self.maximumResponseBody)
            return Answer(outcome: DeliveryOutcome.classify(status: status, retryAfter: retryAfter))
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
}
