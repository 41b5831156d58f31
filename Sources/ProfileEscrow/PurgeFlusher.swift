public import EscrowCore
public import Logging
public import ServiceLifecycle

/// Makes purged bytes leave the store's files within seconds in a busy process (SQLite: old page
/// images stay in the WAL until a checkpoint): the store runs with its checkpoint after every purge
/// off, and this service calls `flushPurged()` every `interval` when the audit head moved (every
/// purge, re-seal and capture appends an event), and once more at shutdown. The one flusher of a
/// process: ``EscrowServiceGroup`` runs it beside the replay worker and the HTTP application.
public struct PurgeFlusher: Service {
    let store: any EscrowRecordStore & AuditTrailStore
    let interval: Duration
    /// What the interval is counted on: the escrow's clock (``EscrowConfiguration/clock``).
    let clock: any WallClock
    let logger: Logger

    public init(
        store: any EscrowRecordStore & AuditTrailStore,
        interval: Duration = .seconds(2),
        clock: any WallClock = SystemWallClock(),
        logger: Logger
    ) {
        self.store = store
        self.interval = interval
        self.clock = clock
        self.logger = logger
    }

    public func run() async throws {
        var flushedAt: Int64? = -1
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            try? await cancelWhenGracefulShutdown { try await clock.sleep(for: interval) }
            flushedAt = await flushIfChanged(since: flushedAt)
        }
        _ = await flushIfChanged(since: flushedAt)
    }

    /// Flushes when the audit head is not the one last flushed; returns the head flushed (or kept).
    private func flushIfChanged(since flushed: Int64?) async -> Int64? {
        do {
            let head = try await store.auditHead()?.sequence
            guard head != flushed else { return flushed }
            try await store.flushPurged()
            return head
        } catch {
            logger.warning("WAL flush failed; will retry", metadata: ["error": "\(error)"])
            return flushed
        }
    }
}
