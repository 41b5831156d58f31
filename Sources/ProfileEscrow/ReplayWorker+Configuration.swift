public import Foundation
public import NIOSSL

extension ReplayWorker {
    /// How a ``ReplayWorker`` delivers. The backend URL and the webhook secret are required; every
    /// other property has a default. Durations are in seconds.
    ///
    /// The retry schedule, attempt limit and confirmation timeout belong to the ``Escrow`` the
    /// worker runs on (``EscrowConfiguration``): the library's own confirm path shares them.
    public struct Configuration: Sendable {
        /// The defaults of every setting but the backend URL and the webhook secrets (placeholders here), for help
        /// texts and documentation.
        public static let `default` = Configuration(
            backendURL: URL(string: "https://backend.invalid/")!,
            webhookSecrets: []
        )

        /// The registration endpoint, `http` or `https` (TLS certificates are verified).
        public var backendURL: URL
        /// The Standard Webhooks secrets that sign every delivery, one signature each (never empty). During a
        /// rotation: the new secret first, then the old one, until the backend knows only the new one.
        public var webhookSecrets: [WebhookSecret]
        /// Requests to the backend in flight at once, per worker. A delivery the backend has answered frees its slot
        /// while its outcome is committed; at most as many answered outcomes again wait for their commit.
        public var concurrency = 4
        /// How long a claimed escrow stays this worker's. At least ``deliveryTimeout`` plus
        /// ``leaseMargin``: a delivery starts only when at least its timeout is left of the lease, and
        /// it ends (answer or not) a margin before the lease does.
        public var leaseDuration: Double = 120
        /// The most one delivery may take, from connecting to the last byte of the answer read; then it
        /// counts as a retryable failure (a timeout).
        public var deliveryTimeout: Double = 30
        /// How often an idle worker looks for due escrows.
        public var pollInterval: Double = 1
        /// How often the worker purges escrows past their retention (`expired`), backend up or not.
        public var sweepInterval: Double = 60
        /// Deliveries a second for the whole cluster: every worker sharing the store takes its slots from one schedule
        /// (``DeliveryRateStore``), so a backlog reaches a backend at this pace however many nodes deliver. Nil: no
        /// limit but ``concurrency``. Backoff and `Retry-After` still decide when each escrow is due. Give every node
        /// the same rate.
        public var deliveryRate: Double?
        /// The worker's name in leases and in the audit trail (`worker:<id>`).
        public var workerID: String = ReplayWorker.defaultWorkerID()
        /// TLS toward the backend: a CA of its own to trust instead of the system's, a client certificate (mutual
        /// TLS). Nil: the system's trust store, no client certificate.
        public var backendTLS: TLSConfiguration?

        /// How long graceful shutdown may take before what is left is cancelled: one delivery timeout
        /// (deliveries in flight end by then) plus 10 s for recording outcomes, giving leases back and a
        /// last flush. A delivery cancelled past it leaves its lease to run out; the lease's fencing token
        /// keeps its late outcome, if any, from changing anything.
        public var gracefulShutdownBound: Duration {
            .milliseconds(Int64(min(deliveryTimeout, 86_400) * 1000)) + .seconds(10)
        }

        /// How long before its lease runs out a delivery must end, so that its outcome is recorded
        /// while the lease is still this worker's: 10% of the delivery timeout, at most 5 seconds.
        public var leaseMargin: Double { min(5, deliveryTimeout / 10) }

        public init(backendURL: URL, webhookSecret: WebhookSecret) {
            self.init(backendURL: backendURL, webhookSecrets: [webhookSecret])
        }

        /// - Precondition: `webhookSecrets` is not empty (``validate()`` checks it).
        public init(backendURL: URL, webhookSecrets: [WebhookSecret]) {
            self.backendURL = backendURL
            self.webhookSecrets = webhookSecrets
        }

        /// Parses the backend URL and one or more space-separated `whsec_<base64>` secrets (the first one
        /// new); throws a clear error for either.
        public init(backendURL: String, webhookSecret: String) throws(EscrowError) {
            guard let url = URL(string: backendURL) else {
                throw EscrowError(.invalidConfiguration, "the backend URL is not a valid URL")
            }
            self.init(backendURL: url, webhookSecrets: try WebhookSecret.list(webhookSecret))
            try Self.checkURL(url)
        }

        /// Checks every setting; ``ReplayWorker/init(escrow:configuration:logger:)`` calls it.
        public func validate() throws(EscrowError) {
            try Self.checkURL(backendURL)
            guard (1...WebhookSecret.maximumCount).contains(webhookSecrets.count) else {
                throw EscrowError(
                    .invalidConfiguration,
                    "give 1 to \(WebhookSecret.maximumCount) webhook secrets (the new one first during a rotation)"
                )
            }
            guard (1...256).contains(concurrency) else {
                throw EscrowError(.invalidConfiguration, "concurrency must be between 1 and 256")
            }
            for (name, value) in [
                ("delivery timeout", deliveryTimeout), ("lease", leaseDuration), ("poll interval", pollInterval),
                ("sweep interval", sweepInterval),
            ] {
                guard value.isFinite, value > 0 else {
                    throw EscrowError(.invalidConfiguration, "the \(name) must be a positive duration")
                }
            }
            if let deliveryRate {
                guard deliveryRate.isFinite, (0.001...Self.maximumDeliveryRate).contains(deliveryRate) else {
                    throw EscrowError(
                        .invalidConfiguration,
                        "the delivery rate must be between 0.001 and \(Int(Self.maximumDeliveryRate)) a second"
                    )
                }
            }
            guard leaseDuration >= deliveryTimeout + leaseMargin else {
                throw EscrowError(
                    .invalidConfiguration,
                    "the lease (\(Self.seconds(leaseDuration))) must be at least the delivery timeout "
                        + "(\(Self.seconds(deliveryTimeout))) plus a margin of \(Self.seconds(leaseMargin)) "
                        + "(10% of the delivery timeout, at most 5s) to record the outcome in"
                )
            }
            let allowed = Set("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz._:-".utf8)
            guard (1...64).contains(workerID.utf8.count), workerID.utf8.allSatisfy(allowed.contains) else {
                throw EscrowError(.invalidConfiguration, "the worker id must be 1-64 characters of [A-Za-z0-9._:-]")
            }
            // At start rather than at the first delivery: a CA file that cannot be read, a key that is not the
            // certificate's.
            _ = try BackendClient.tlsContext(for: backendURL, configured: backendTLS)
        }

        /// The backend's host when deliveries would cross a network in clear text: an `http` URL whose
        /// host is not loopback (`localhost`, `127.0.0.0/8`, `::1`). Nil for `https` and for loopback,
        /// where a sidecar on the same machine may terminate TLS.
        public var cleartextHost: String? {
            guard backendURL.scheme?.lowercased() == "http", let host = backendURL.host?.lowercased() else {
                return nil
            }
            let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
            if bare == "localhost" || bare == "localhost." || bare == "::1" || bare == "0:0:0:0:0:0:0:1" {
                return nil
            }
            let octets = bare.split(separator: ".", omittingEmptySubsequences: false)
            if octets.count == 4, octets[0] == "127", octets.allSatisfy({ UInt8($0) != nil }) { return nil }
            return host
        }

        /// The highest ``deliveryRate``: slots are kept to the microsecond.
        public static let maximumDeliveryRate: Double = 100_000

        /// `30s`, `2.5s`, `0.25s`: a duration for an error message, to the millisecond.
        static func seconds(_ value: Double) -> String {
            let rounded = (value * 1000).rounded() / 1000
            return rounded == rounded.rounded() && abs(rounded) < 1e15 ? "\(Int64(rounded))s" : "\(rounded)s"
        }

        static func checkURL(_ url: URL) throws(EscrowError) {
            guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
                let host = url.host, !host.isEmpty
            else {
                throw EscrowError(
                    .invalidConfiguration,
                    "the backend URL must be an http:// or https:// URL with a host"
                )
            }
            guard url.user == nil, url.password == nil else {
                throw EscrowError(.invalidConfiguration, "the backend URL must not carry credentials")
            }
        }
    }

    /// `<host>-<pid>-<4 random hex>`: unique per process, readable in the audit trail.
    public static func defaultWorkerID() -> String {
        let allowed = Set("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz.-".utf8)
        let host = String(
            decoding: ProcessInfo.processInfo.hostName.utf8.filter(allowed.contains).prefix(40),
            as: UTF8.self
        )
        let suffix = String(UInt16.random(in: 0...UInt16.max), radix: 16)
        return "\(host.isEmpty ? "worker" : host)-\(ProcessInfo.processInfo.processIdentifier)-\(suffix)"
    }
}
