public import Logging
public import ServiceLifecycle
import UnixSignals

/// The long-running services of a process, put together in the one order that is right, so the CLI,
/// the tests and a library user's own `main` cannot get it wrong.
///
/// Services start in array order and stop in reverse on SIGTERM or SIGINT: whatever comes last (the
/// HTTP application, when there is one) stops taking work first, then the replay worker finishes its
/// deliveries and gives back its leases, and the ``PurgeFlusher`` stops last, after a final flush.
public enum EscrowServiceGroup {
    /// The replay worker and the flusher that keeps purged bytes out of the store's files: what
    /// `profile-escrow replay` runs, and what `serve` runs under its HTTP application.
    ///
    /// Open the store with its per-purge flush off (SQLite: `checkpointAfterPurge = false`): the
    /// flusher batches it.
    ///
    /// With `keyringPath`, a ``KeyringReloader`` follows that file (on SIGHUP and when it changes), so keys
    /// rotate, rewrap and retire while the process runs.
    public static func replayServices(
        escrow: Escrow,
        worker configuration: ReplayWorker.Configuration?,
        keyringPath: String? = nil,
        flushInterval: Duration = .seconds(2),
        logger: Logger
    ) throws -> [any Service] {
        var services: [any Service] = [
            PurgeFlusher(store: escrow.store, interval: flushInterval, clock: escrow.clock, logger: logger)
        ]
        if let keyringPath { services.append(KeyringReloader(escrow: escrow, path: keyringPath, logger: logger)) }
        if let configuration {
            services.append(try ReplayWorker(escrow: escrow, configuration: configuration, logger: logger))
        }
        return services
    }

    /// How long what is left after the graceful shutdown bound may take to end once cancelled. Past it the process
    /// ends with a fatal error: a task that ignores cancellation must not keep it alive. Nothing is lost that way
    /// (everything acknowledged is already durable, and leases run out by themselves).
    public static let cancellationBound: Duration = .seconds(5)

    /// Runs `services` until SIGTERM or SIGINT, then shuts them down gracefully within `shutdownBound`, then
    /// cancels what is left (see ``cancellationBound``).
    public static func run(
        _ services: [any Service],
        shutdownBound: Duration,
        logger: Logger
    ) async throws {
        var configuration = ServiceGroupConfiguration(
            services: services.map { .init(service: $0) },
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        )
        configuration.maximumGracefulShutdownDuration = shutdownBound
        configuration.maximumCancellationDuration = cancellationBound
        try await ServiceGroup(configuration: configuration).run()
    }
}
