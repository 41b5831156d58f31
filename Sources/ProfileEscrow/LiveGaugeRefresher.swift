import EscrowCore
public import Logging
public import Metrics
public import ServiceLifecycle

import struct Foundation.Date

/// Publishes the live gauges (live escrows by state, oldest pending age, whether deliveries are paused) every `interval` of the escrow's
/// clock, off the request path: a `/metrics` scrape only reads what was last published, so it never runs a query
/// and never delays a capture, however large the store and however often it is scraped.
///
/// The replay worker publishes the same gauges after each retention sweep; a process without a worker
/// (a capture-only node, `serve` without the worker) runs this service instead.
public struct LiveGaugeRefresher: Service {
    public let escrow: Escrow
    public let interval: Duration
    public let factory: any MetricsFactory
    public let logger: Logger

    public init(
        escrow: Escrow,
        interval: Duration = .seconds(15),
        factory: any MetricsFactory = MetricsSystem.factory,
        logger: Logger
    ) {
        self.escrow = escrow
        self.interval = interval
        self.factory = factory
        self.logger = logger
    }

    /// Publishes once now, then every `interval` until graceful shutdown.
    public func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            await refresh()
            try? await cancelWhenGracefulShutdown { try await escrow.clock.sleep(for: interval) }
        }
    }

    /// One refresh: one summary query and the delivery switch, then the gauges.
    public func refresh() async {
        do {
            let now = escrow.clock.now()
            EscrowMetrics.live(try await escrow.store.summary(at: now), at: now, factory: factory)
            EscrowMetrics.deliveriesPaused(try await escrow.store.deliveryControl().paused, factory: factory)
        } catch {
            logger.warning("refreshing the live gauges failed", metadata: ["error": "\(error)"])
        }
    }
}
