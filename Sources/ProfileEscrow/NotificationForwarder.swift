public import EscrowCore
public import EscrowCrypto
public import Foundation
public import Logging
public import Metrics
public import NIOSSL
public import ServiceLifecycle

/// Forwards verified Apple server-to-server notifications to the backend, signed like deliveries (Standard Webhooks:
/// `webhook-id`, `webhook-timestamp`, `webhook-signature` over the webhook secrets), so that Apple's one notification
/// URL can be this service's and the backend still hears every event.
///
/// Durable: ``record(idHash:id:body:at:)`` records a notification as handled and queues its forwarded copy in the
/// store's outbox (``NotificationOutbox``) in one transaction, before Apple gets its answer; the body is sealed to the
/// keyring's active master key version, never stored in clear. A `Service`: ``run()`` claims due entries a few at a
/// time with a lease (forwarders on several nodes share one outbox and never send one entry at once), opens and
/// sends each, and deletes it once the backend took it (2xx) or refused it (4xx), or retries it with exponential
/// backoff (1 s doubling to ``Configuration/maximumBackoff``, or the backend's `Retry-After`) for
/// ``Configuration/maximumAttempts`` attempts. Entries outlive a restart; one older than ``OutboxEntry/retention``
/// (a day), or sealed to a key version the keyring no longer has, is given up. Every give-up is logged with its webhook id,
/// never its content.
///
/// Several URLs (``Configuration/urls``): each gets its own copy, queued in the same transaction as its own outbox
/// entry and sent, retried and given up on its own, so a staging backend that is down never holds production's. The
/// first URL's entry is keyed by the webhook id, every other's by the webhook id, `~` and a tag of its URL; every
/// copy is sent with the webhook id itself, so each receiver can tell Apple's retries from new notifications.
///
/// Metrics (labels are outcomes only): `profile_escrow_notifications_forwarded_total{outcome}` (`delivered`,
/// `rejected`, `given_up`, `unopenable`, and `full` for one the outbox had no room for), and the gauge
/// `profile_escrow_notification_outbox_entries`, counted through the store by the running forwarder at most every
/// ``outboxCountInterval`` seconds, never on a request's path.
public final class NotificationForwarder: Service, Sendable {
    public struct Configuration: Sendable {
        /// Where notifications are POSTed: every URL gets its own copy.
        public var urls: [URL]
        /// The webhook secrets the requests are signed with (the deliveries' own).
        public var secrets: [WebhookSecret]
        /// The most entries the outbox holds: past it, a notification is still handled and answered, but its copy is
        /// not queued (logged with its webhook id).
        public var capacity = 100_000
        /// Attempts per notification before it is given up (logged).
        public var maximumAttempts = 12
        /// The longest wait between two attempts.
        public var maximumBackoff: Double = 300
        /// One attempt's deadline, answer included.
        public var timeout: Double = 10
        /// TLS toward the backend, as the deliveries' (``ReplayWorker/Configuration/backendTLS``).
        public var tls: TLSConfiguration?

        public init(urls: [URL], secrets: [WebhookSecret]) {
            self.urls = urls
            self.secrets = secrets
        }

        public init(url: URL, secrets: [WebhookSecret]) {
            self.init(urls: [url], secrets: secrets)
        }

        /// The key of `url`'s entries beside the webhook id: none for the first URL (whose entries are keyed by the
        /// webhook id alone, as when there is one), a tag of the URL for the others, so that a URL keeps its entries
        /// when another is added or removed.
        func destination(of url: URL) -> String {
            url == urls.first ? "" : Hex.encode(Hashing.blake2b256(Array(url.absoluteString.utf8)).prefix(6))
        }

        /// Entries claimed at once.
        static let batch = 4

        /// How long a claim holds its entries: every attempt of the batch at its deadline, and a margin.
        var lease: Double { Double(Self.batch) * (timeout + 5) + 30 }

        /// The backoff before attempt `attempts + 1`: 1 s doubling, at least the backend's `Retry-After`, at most
        /// ``maximumBackoff``.
        func backoff(after attempts: Int, retryAfter: Double?) -> Double {
            let doubling = RetryPolicy(base: 1, cap: maximumBackoff).ceiling(afterAttempt: attempts)
            return min(maximumBackoff, max(doubling, retryAfter ?? 0))
        }
    }

    public let configuration: Configuration
    let outbox: any NotificationOutbox
    let keyring: @Sendable () -> Keyring
    let clock: any WallClock
    let logger: Logger
    let factory: any MetricsFactory
    private let wakeup: Wakeup
    /// How long an idle forwarder waits before looking at the outbox again (a ``record(idHash:id:body:at:)`` in this
    /// process wakes it at once).
    static let idlePoll: Double = 1
    /// How often entries past the retention are swept.
    static let sweepInterval: Double = 60
    /// How often the outbox's entries are counted for the gauge: one `COUNT` over at most ``Configuration/capacity``
    /// rows.
    static let outboxCountInterval: Double = 5

    /// `keyring`: the keyring in use now (it may be reloaded); `outbox`: the store the notification log is in;
    /// `factory`: where its metrics go (the process's by default).
    public init(
        _ configuration: Configuration,
        outbox: any NotificationOutbox,
        keyring: @escaping @Sendable () -> Keyring,
        clock: any WallClock = SystemWallClock(),
        logger: Logger,
        factory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.configuration = configuration
        self.outbox = outbox
        self.keyring = keyring
        self.clock = clock
        self.logger = logger
        self.factory = factory
        self.wakeup = Wakeup(clock: clock)
        EscrowMetrics.forwardingStarted(factory: factory)
    }

    /// Records a handled notification (`idHash`: the hash of its `jti`) and queues its forwarded copy (`id`: the
    /// webhook id, stable across Apple's retries), sealed, in one transaction. A full outbox is logged: the
    /// notification is recorded all the same.
    @discardableResult
    public func record(idHash: [UInt8], id: String, body: [UInt8], at now: Date) async throws -> NotificationRecording {
        let (version, sealed) = try keyring().sealNotification(body, webhookID: id)
        let entries = configuration.urls.map { url in
            let destination = configuration.destination(of: url)
            return OutboxEntry(
                webhookID: destination.isEmpty ? id : id + "~" + destination,
                keyVersion: version,
                sealedBody: sealed,
                nextAttemptAt: now,
                createdAt: now
            )
        }
        let recorded = try await outbox.recordNotification(
            idHash: idHash,
            at: now,
            forward: entries,
            capacity: configuration.capacity
        )
        switch recorded {
        case .queued: wakeup.signal()
        case .full:
            EscrowMetrics.forwarded(.full, factory: factory)
            logger.error(
                "an Apple notification is not forwarded: the outbox is full",
                metadata: ["webhook.id": "\(id)", "capacity": "\(configuration.capacity)"]
            )
        case .duplicate, .recorded: break
        }
        return recorded
    }

    public func run() async throws {
        try await withClients(configuration.urls[...], opened: [:]) { clients in
            await cancelWhenGracefulShutdown {
                await self.loop(clients)
            }
        }
        let left = await countOutbox()
        if let left, left > 0 {
            logger.notice(
                "stopping with Apple notifications still to forward: they are sent after the next start",
                metadata: ["count": "\(left)"]
            )
        }
    }

    /// Runs `body` with a client for each URL, keyed by its ``Configuration/destination(of:)``; each is shut down
    /// when `body` returns.
    private func withClients(
        _ urls: ArraySlice<URL>,
        opened: [String: BackendClient],
        _ body: ([String: BackendClient]) async -> Void
    ) async throws {
        guard let url = urls.first else { return await body(opened) }
        var settings = ReplayWorker.Configuration(backendURL: url, webhookSecrets: configuration.secrets)
        settings.concurrency = 1
        settings.deliveryTimeout = configuration.timeout
        settings.backendTLS = configuration.tls
        try await BackendClient.with(settings) { client in
            var opened = opened
            opened[configuration.destination(of: url)] = client
            try await withClients(urls.dropFirst(), opened: opened, body)
        }
    }

    private func loop(_ clients: [String: BackendClient]) async {
        var nextSweep = clock.now()
        var nextCount = nextSweep
        var warnedPublicOnly = false
        while !Task.isCancelled {
            let now = clock.now()
            if now >= nextSweep {
                await sweep(at: now)
                nextSweep = now.addingTimeInterval(Self.sweepInterval)
            }
            if now >= nextCount {
                await countOutbox()
                nextCount = clock.now().addingTimeInterval(Self.outboxCountInterval)
            }
            // A capture-only node cannot open the bodies: a node with the full keyring forwards them. Nor can a node
            // whose keys are still wrapped (its custody engine was down at start): it waits, and gives nothing up.
            guard !keyring().isPublicOnly else {
                if !warnedPublicOnly {
                    logger.notice("Apple notifications are queued here and forwarded by a node with the full keyring")
                    warnedPublicOnly = true
                }
                await wakeup.wait(seconds: Self.sweepInterval)
                continue
            }
            guard !keyring().isWrapped else {
                await wakeup.wait(seconds: Self.idlePoll)
                continue
            }
            let claimed =
                await settle("claiming Apple notifications to forward") {
                    try await self.outbox.claimOutbox(
                        at: now,
                        limit: Configuration.batch,
                        lease: self.configuration.lease
                    )
                } ?? []
            if claimed.isEmpty {
                await wakeup.wait(seconds: Self.idlePoll)
                continue
            }
            for (index, entry) in claimed.enumerated() {
                guard !Task.isCancelled else {
                    // Stopping: the rest of the batch is due again at once, for the next forwarder to take.
                    for left in claimed[index...] { await reschedule(left, at: clock.now()) }
                    break
                }
                await send(entry, clients)
            }
        }
    }

    private func sweep(at now: Date) async {
        _ = await settle("sweeping the outbox") {
            try await self.outbox.sweepExpired(at: now, logger: self.logger, factory: self.factory)
        }
    }

    /// Counts the outbox's entries and publishes them as the gauge; nil (the gauge kept) when the store fails.
    @discardableResult
    private func countOutbox() async -> Int? {
        guard let count = await settle("counting the outbox", { try await self.outbox.outboxCount() }) else {
            return nil
        }
        EscrowMetrics.outboxEntries(count, factory: factory)
        return count
    }

    private func send(_ entry: OutboxEntry, _ clients: [String: BackendClient]) async {
        let parts = entry.webhookID.split(separator: "~", maxSplits: 1)
        let webhookID = String(parts.first ?? "")
        guard let client = clients[parts.count > 1 ? String(parts[1]) : ""] else {
            await delete(entry, .givenUp, "an Apple notification was not forwarded: its URL is no longer configured")
            return
        }
        let body: [UInt8]
        do {
            body = try keyring().openNotification(
                entry.sealedBody,
                keyVersion: entry.keyVersion,
                webhookID: webhookID
            )
        } catch {
            await delete(
                entry,
                .unopenable,
                "an Apple notification was not forwarded: its sealed body does not open (\(error.message))"
            )
            return
        }
        let answer = await client.deliver(
            body: body,
            escrowID: webhookID,
            within: configuration.timeout,
            now: clock.now()
        )
        let status = answer.outcome.status.map(String.init) ?? "-"
        switch answer.outcome {
        case .confirmed, .accepted:
            await delete(entry, .delivered, nil)
            logger.info(
                "Apple notification forwarded",
                metadata: ["webhook.id": "\(entry.webhookID)", "http.status": "\(status)"]
            )
        case .rejected:
            await delete(
                entry,
                .rejected,
                "the backend refused a forwarded Apple notification; it is not sent again",
                status: status
            )
        case .retry, .timedOut:
            guard entry.attempts < configuration.maximumAttempts else {
                await delete(
                    entry,
                    .givenUp,
                    "an Apple notification was not forwarded: the backend did not take it",
                    status: status
                )
                return
            }
            var retryAfter: Double?
            if case .retry(_, let after?) = answer.outcome { retryAfter = after }
            let backoff = configuration.backoff(after: entry.attempts, retryAfter: retryAfter)
            logger.warning(
                "forwarding an Apple notification failed; it is retried",
                metadata: [
                    "webhook.id": "\(entry.webhookID)", "attempts": "\(entry.attempts)", "http.status": "\(status)",
                    "error": "\(answer.failure ?? "-")", "retry.in": "\(backoff)s",
                ]
            )
            await reschedule(entry, at: clock.now().addingTimeInterval(backoff))
        }
    }

    /// Deletes an entry and counts its `outcome`; `giveUp`, when it was not forwarded, is logged with its webhook id.
    private func delete(
        _ entry: OutboxEntry,
        _ outcome: EscrowMetrics.ForwardOutcome,
        _ giveUp: String?,
        status: String = "-"
    ) async {
        EscrowMetrics.forwarded(outcome, factory: factory)
        if let giveUp {
            logger.error(
                "\(giveUp)",
                metadata: [
                    "webhook.id": "\(entry.webhookID)", "attempts": "\(entry.attempts)", "http.status": "\(status)",
                ]
            )
        }
        _ = await settle("deleting a forwarded Apple notification") {
            try await self.outbox.deleteOutbox(webhookID: entry.webhookID)
        }
    }

    private func reschedule(_ entry: OutboxEntry, at next: Date) async {
        _ = await settle("rescheduling a forwarded Apple notification") {
            try await self.outbox.rescheduleOutbox(webhookID: entry.webhookID, attempts: entry.attempts, at: next)
        }
    }

    /// Runs a store operation to its end even while the forwarder stops (its own task: a stop does not cancel it
    /// half way); a failure is logged (store errors name no person) and gives nil: the entry comes back after its
    /// lease.
    private func settle<T: Sendable>(_ what: String, _ body: @escaping @Sendable () async throws -> T) async -> T? {
        switch await Task(operation: body).result {
        case .success(let value): return value
        case .failure(let error):
            logger.warning("\(what) failed", metadata: ["error": "\(error)"])
            return nil
        }
    }
}

extension NotificationOutbox {
    /// Deletes the entries older than ``OutboxEntry/retention`` at `now`, each logged with its webhook id (never its
    /// content) and counted as given up; returns how many.
    @discardableResult
    func sweepExpired(
        at now: Date,
        logger: Logger,
        factory: any MetricsFactory = MetricsSystem.factory
    ) async throws -> Int {
        let swept = try await sweepOutbox(createdBefore: now.addingTimeInterval(-OutboxEntry.retention))
        EscrowMetrics.forwarded(.givenUp, count: swept.count, factory: factory)
        for id in swept {
            logger.error(
                "an Apple notification was not forwarded: it is older than the outbox's retention",
                metadata: ["webhook.id": "\(id)", "retention": "\(Int(OutboxEntry.retention))s"]
            )
        }
        return swept.count
    }
}
