public import EscrowCore
public import EscrowCrypto
public import Tracing

/// How an ``Escrow`` behaves; every property has a sensible default, written here only.
public struct EscrowConfiguration: Sendable {
    /// The defaults, for help texts and documentation.
    public static let `default` = EscrowConfiguration()

    /// How long an escrow may be kept, from capture, before it is purged as `expired` (default 30 days).
    public var retention: Double = 30 * 24 * 3600
    /// Retry schedule and attempt limit of deliveries.
    public var retryPolicy = RetryPolicy()
    /// How long to wait for a confirm call after a `202` before delivering again (default 1 hour, the lifecycle's).
    public var confirmTimeout: Double = EscrowLifecycle.defaultConfirmTimeout
    /// Where every escrow operation, the replay worker, the sweeps and the HTTP routes read the time, and where
    /// the escrow's services wait (``PurgeFlusher``, ``KeyringReloader``, ``LiveGaugeRefresher``, a key cycle's
    /// grace, the HTTP drain delay).
    public var clock: any WallClock = SystemWallClock()
    /// Where the escrow's spans go (capture with its seal and commit, and the replay worker's claims, deliveries and
    /// commits), and the HTTP service's request spans; nil (the default) creates none. `profile-escrow serve` and
    /// `replay` set it to swift-otel's tracer when the OTEL_* environment turns traces on. Spans never carry personal
    /// data.
    public var tracer: (any Tracer)?
    /// Sealing keys made ahead of captures (``SealingKeyReserve``), started and stopped by its owner; nil (the
    /// default) makes each capture's keys when it seals. `profile-escrow serve` sets one.
    public var sealingKeys: SealingKeyReserve?

    public init() {}

    var lifecycle: EscrowLifecycle {
        EscrowLifecycle(policy: retryPolicy, confirmTimeout: confirmTimeout)
    }
}
