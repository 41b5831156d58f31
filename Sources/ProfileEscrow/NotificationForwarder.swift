import AsyncHTTPClient
import EscrowCore
public import Foundation
public import Logging
import NIOConcurrencyHelpers
public import NIOSSL
public import ServiceLifecycle

/// Forwards verified Apple server-to-server notifications to the backend, signed like deliveries (Standard Webhooks:
/// `webhook-id`, `webhook-timestamp`, `webhook-signature` over the webhook secrets), so that Apple's one notification
/// URL can be this service's and the backend still hears every event.
///
/// A `Service`: ``run()`` sends what ``forward(id:body:)`` queued until graceful shutdown, one at a time, retrying
/// with exponential backoff (1 s doubling to ``Configuration/maximumBackoff``) for ``Configuration/maximumAttempts``
/// attempts. The queue is in memory and bounded (``Configuration/capacity``): a notification still queued when the
/// process stops, or refused because the queue is full, is not forwarded (logged with its id, never its content).
/// The effect on the escrow itself (a purge, an email change) is durable before Apple's answer, forwarded or not.
public final class NotificationForwarder: Service, Sendable {
    public struct Configuration: Sendable {
        /// Where notifications are POSTed.
        public var url: URL
        /// The webhook secrets the requests are signed with (the deliveries' own).
        public var secrets: [WebhookSecret]
        /// The most notifications waiting at once.
        public var capacity = 1_000
        /// Attempts per notification before it is given up (logged).
        public var maximumAttempts = 12
        /// The longest wait between two attempts.
        public var maximumBackoff: Double = 300
        /// One attempt's deadline, answer included.
        public var timeout: Double = 10
        /// TLS toward the backend, as the deliveries' (``ReplayWorker/Configuration/backendTLS``).
        public var tls: TLSConfiguration?

        public init(url: URL, secrets: [WebhookSecret]) {
            self.url = url
            self.secrets = secrets
        }
    }

    struct Item: Sendable {
        let id: String
        let body: [UInt8]
        var attempts = 0
        var due: ContinuousClock.Instant
    }

    public let configuration: Configuration
    let logger: Logger
    private let queue = NIOLockedValueBox<[Item]>([])
    /// How often an idle forwarder looks at its queue: a new notification waits at most this long.
    static let idlePoll: Duration = .milliseconds(200)

    public init(_ configuration: Configuration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// Queues one notification (`id`: the webhook id, stable across retries). False when the queue is full: it is
    /// dropped and logged.
    @discardableResult
    public func forward(id: String, body: [UInt8]) -> Bool {
        let queued = queue.withLockedValue { items in
            guard items.count < configuration.capacity else { return false }
            items.append(Item(id: id, body: body, due: .now))
            return true
        }
        if !queued {
            logger.error(
                "an Apple notification was not forwarded: the queue is full",
                metadata: ["webhook.id": "\(id)"]
            )
        }
        return queued
    }

    /// How many notifications wait.
    public var pending: Int { queue.withLockedValue { $0.count } }

    public func run() async throws {
        let worker = ReplayWorker.Configuration(backendURL: configuration.url, webhookSecrets: configuration.secrets)
        var settings = worker
        settings.concurrency = 1
        settings.deliveryTimeout = configuration.timeout
        settings.backendTLS = configuration.tls
        try await BackendClient.with(settings, logger: logger) { client in
            await cancelWhenGracefulShutdown {
                await self.loop(client)
            }
        }
        let left = pending
        if left > 0 {
            logger.warning("stopping with Apple notifications not forwarded", metadata: ["count": "\(left)"])
        }
    }

    private func loop(_ client: BackendClient) async {
        while !Task.isCancelled {
            let now = ContinuousClock.now
            let next = queue.withLockedValue { items -> Item? in
                guard let index = items.firstIndex(where: { $0.due <= now }) else { return nil }
                return items.remove(at: index)
            }
            guard var item = next else {
                // Sleep until the next one is due, looking for new ones meanwhile.
                let due = queue.withLockedValue { $0.map(\.due).min() }
                let wait = due.map { max(.zero, $0 - now) } ?? Self.idlePoll
                try? await Task.sleep(for: min(wait, Self.idlePoll))
                continue
            }
            let answer = await client.deliver(
                body: item.body,
                escrowID: item.id,
                within: configuration.timeout,
                now: Date()
            )
            item.attempts += 1
            let status = answer.outcome.status.map(String.init) ?? "-"
            switch answer.outcome {
            case .confirmed, .accepted:
                logger.info(
                    "Apple notification forwarded",
                    metadata: ["webhook.id": "\(item.id)", "http.status": "\(status)"]
                )
            case .rejected:
                logger.error(
                    "the backend refused a forwarded Apple notification; it is not sent again",
                    metadata: ["webhook.id": "\(item.id)", "http.status": "\(status)"]
                )
            case .retry, .timedOut:
                guard item.attempts < configuration.maximumAttempts else {
                    logger.error(
                        "an Apple notification was not forwarded: the backend did not take it",
                        metadata: ["webhook.id": "\(item.id)", "attempts": "\(item.attempts)"]
                    )
                    continue
                }
                var backoff = min(configuration.maximumBackoff, pow(2, Double(item.attempts - 1)))
                if case .retry(_, let retryAfter?) = answer.outcome { backoff = max(backoff, retryAfter) }
                item.due = .now + .milliseconds(Int64(min(backoff, configuration.maximumBackoff) * 1000))
                logger.warning(
                    "forwarding an Apple notification failed; it is retried",
                    metadata: [
                        "webhook.id": "\(item.id)", "attempts": "\(item.attempts)", "http.status": "\(status)",
                        "error": "\(answer.failure ?? "-")",
                    ]
                )
                let retry = item
                queue.withLockedValue { $0.append(retry) }
            }
        }
    }
}
