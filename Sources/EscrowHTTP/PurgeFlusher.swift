public import EscrowCore
public import Logging
public import ServiceLifecycle

/// Makes purged bytes leave SQLite's WAL within seconds in a busy service (SPEC §5): the store runs
/// with `checkpointAfterPurge = false`, and this service calls `flushPurged()` every `interval` when
/// the audit head moved (every purge, re-seal and capture appends an event), and once more at
/// shutdown.
public struct PurgeFlusher: Service {
    let store: any EscrowStore
    let interval: Duration
    let logger: Logger

    public init(store: any EscrowStore, interval: Duration = .seconds(2), logger: Logger) {
        self.store = store
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        var flushedAt: Int64? = -1
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
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
