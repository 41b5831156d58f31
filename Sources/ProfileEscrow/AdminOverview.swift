public import EscrowCore
public import Foundation
public import Logging
import NIOConcurrencyHelpers
public import ServiceLifecycle

/// What an operator sees first (`GET /v1/admin/overview`, the console's overview and keys pages): live escrows by
/// state, the oldest pending age, and the last 24 hours of the audit trail counted by type. Made off the request path
/// by ``AdminOverviewPublisher``: a request reads the last one published.
public struct AdminOverview: Sendable, Equatable {
    public var generatedAt: Date
    public var live: [EscrowState: Int]
    public var oldestPendingCreatedAt: Date?
    public var overdue: Int
    /// Dead escrows by code.
    public var deadByCode: [String: Int]
    /// Audit events of the last 24 hours.
    public var captures: Int
    /// Delivery attempts by outcome (`confirmed`, `accepted`, `retry`, `rejected`).
    public var deliveries: [String: Int]
    /// Purges by reason.
    public var purges: [String: Int]
    /// Escrows that went dead, by code.
    public var died: [String: Int]
    public var requeued: Int
    /// Live escrows by the master key version their key is sealed to.
    public var keyVersionsInUse: [UInt32: Int]
    public var retiredKeyVersions: Set<UInt32>
    /// The newest key rotation, rewrap or retirement.
    public var lastKeyCycleAt: Date?

    public static let window: TimeInterval = 24 * 3600

    /// The backlog over the last 24 hours, as the store keeps it (``BacklogHistoryStore``): a point every 5 minutes,
    /// sampled by whichever node published then, the newest last (empty in a read that was not published).
    public var history: [DepthPoint] = []

    /// The backlog at one time: pending and dead escrows, and the oldest pending age.
    public typealias DepthPoint = BacklogSample

    /// The backlog history's step: one sample a slot this long is kept.
    public static let historySlotSeconds = 300

    public var oldestPendingAgeSeconds: Int? {
        oldestPendingCreatedAt.map { max(0, Int(generatedAt.timeIntervalSince($0))) }
    }

    /// Reads it from the store: one summary, one range of the audit trail's time index, the key versions.
    public static func read(from escrow: Escrow) async throws -> AdminOverview {
        let store = escrow.store
        let now = escrow.clock.now()
        let summary = try await store.summary(at: now)
        let counts = try await store.auditCounts(since: now.addingTimeInterval(-window))
        var overview = AdminOverview(
            generatedAt: now,
            live: summary.live,
            oldestPendingCreatedAt: summary.oldestPendingCreatedAt,
            overdue: summary.overdue,
            deadByCode: [:],
            captures: 0,
            deliveries: [:],
            purges: [:],
            died: [:],
            requeued: 0,
            keyVersionsInUse: try await store.keyVersionsInUse(),
            retiredKeyVersions: try await store.retiredKeyVersions(),
            lastKeyCycleAt: try await store.lastAuditEvent(of: AuditCount.keyTypes)
        )
        for dead in summary.dead { overview.deadByCode[dead.code?.rawValue ?? "malformed", default: 0] += 1 }
        for count in counts {
            let detail = count.detail ?? "unknown"
            switch count.type {
            case .captured: overview.captures += count.count
            case .deliveryAttempted: overview.deliveries[detail, default: 0] += count.count
            case .purged:
                overview.purges[detail, default: 0] += count.count
                // A confirmed delivery is one `purged` (confirmed) event with the delivery's status.
                if count.withStatus { overview.deliveries[detail, default: 0] += count.count }
            case .dead: overview.died[detail, default: 0] += count.count
            case .requeued: overview.requeued += count.count
            default: break
            }
        }
        return overview
    }
}

/// Publishes an ``AdminOverview`` every `interval` (and once at start), off the request path, as
/// ``LiveGaugeRefresher`` publishes the gauges: a request reads the last one, so the overview costs the same over a
/// thousand escrows or a million. Before the first is published, ``latest()`` reads one itself.
public final class AdminOverviewPublisher: Service, Sendable {
    public let escrow: Escrow
    public let interval: Duration
    let logger: Logger
    private let published = NIOLockedValueBox<AdminOverview?>(nil)
    /// How long the last read took, in seconds: the wait between reads is at least 20 times that, so publishing costs
    /// at most about 5% of one core however large the store (a read took 0.6 s over a million escrows).
    private let lastCost = NIOLockedValueBox<Double>(0)

    /// The wait between two reads: `interval`, or 20 times the last read's cost when that is longer.
    var period: Double { max(Double(interval.components.seconds), 20 * lastCost.withLockedValue { $0 }) }

    public init(escrow: Escrow, interval: Duration = .seconds(10), logger: Logger) {
        self.escrow = escrow
        self.interval = interval
        self.logger = logger
    }

    /// The last overview published; read now when none is yet, or when the last is older than three intervals (the
    /// service is not running).
    public func latest() async throws -> AdminOverview {
        if let overview = published.withLockedValue({ $0 }),
            escrow.clock.now().timeIntervalSince(overview.generatedAt) < 3 * period
        {
            return overview
        }
        return try await refresh()
    }

    /// Reads and publishes one now (after an operator's change, say).
    @discardableResult
    public func refresh() async throws -> AdminOverview {
        let started = ContinuousClock.now
        var overview = try await AdminOverview.read(from: escrow)
        let cost = started.duration(to: .now)
        lastCost.withLockedValue { $0 = Double(cost.components.seconds) + Double(cost.components.attoseconds) / 1e18 }
        overview.history = try await history(with: overview)
        return published.withLockedValue { current in
            if current.map({ $0.generatedAt <= overview.generatedAt }) ?? true { current = overview }
            return overview
        }
    }

    /// The store's backlog history with `overview`'s sample recorded: every node shares it, and a restart keeps it.
    /// A store that refuses the write (open read-only) still gives the history the others recorded.
    private func history(with overview: AdminOverview) async throws -> [AdminOverview.DepthPoint] {
        let store = escrow.store
        let sample = BacklogSample(
            at: overview.generatedAt,
            pending: overview.live[.pending] ?? 0,
            dead: overview.live[.dead] ?? 0,
            oldestPendingAgeSeconds: overview.oldestPendingAgeSeconds
        )
        do {
            try await store.recordBacklogSample(
                sample,
                slotSeconds: AdminOverview.historySlotSeconds,
                window: AdminOverview.window
            )
        } catch {
            logger.debug("recording a backlog sample failed", metadata: ["error": "\(error)"])
        }
        return try await store.backlogSamples(since: overview.generatedAt.addingTimeInterval(-AdminOverview.window))
    }

    public func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do { try await refresh() } catch {
                logger.warning("refreshing the admin overview failed", metadata: ["error": "\(error)"])
            }
            let wait = Duration.milliseconds(Int64(period * 1000))
            try? await cancelWhenGracefulShutdown { [escrow] in try await escrow.clock.sleep(for: wait) }
        }
    }
}
