import EscrowCore
import EscrowCrypto
import Foundation
public import Logging
public import ServiceLifecycle
import Tracing

/// Retry, then replay: delivers captured escrows to the registration backend until it
/// confirms them, then they are purged.
///
/// A `Service` for swift-service-lifecycle: ``run()`` keeps delivering until graceful shutdown, then
/// claims nothing more, lets deliveries in flight finish (each within the delivery timeout) and
/// gives back the leases of anything claimed but not started. ``runOnce(progress:)`` delivers what
/// is due now and returns. A ``Configuration/backendURL`` in plain `http` to a host that is not
/// loopback is logged as a warning when the worker is made.
///
/// ```swift
/// let worker = try ReplayWorker(
///     escrow: escrow,
///     configuration: try .init(backendURL: "https://api.example.com/register", webhookSecret: secret),
///     logger: logger
/// )
/// let group = ServiceGroup(services: [worker], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
///
/// Every escrow is leased before it is delivered (``EscrowStore/claimDue(at:limit:owner:leaseDuration:)``),
/// and its outcome is committed with the lease's fencing token: any number of workers on one store
/// never deliver one escrow at the same time, and a worker that stalled past its lease changes
/// nothing. The loop also sweeps escrows past their retention, so retention holds while the backend
/// is down.
///
/// Before each claim the worker reads the store's delivery switch (``DeliveryControlStore``): while an operator has
/// paused deliveries it claims nothing, so every worker on every node sharing the store stops within one poll
/// interval, and gives back the leases of what it had claimed but not started; deliveries in flight finish, and
/// retention sweeps go on. It claims again at the first poll after the resume.
public final class ReplayWorker: Service {
    public let configuration: Configuration
    let escrow: Escrow
    let logger: Logger
    /// The longest wait between two failing claims.
    static let claimBackoffLimit: Duration = .seconds(30)

    /// Fails when a setting is out of range (``EscrowError/Code/invalidConfiguration``) or when
    /// the escrow's keyring is public-only (``EscrowError/Code/captureOnly``): such a node can
    /// never open what it would deliver.
    public init(escrow: Escrow, configuration: Configuration, logger: Logger) throws(EscrowError) {
        try configuration.validate()
        guard !escrow.isCaptureOnly else {
            throw EscrowError(.captureOnly, "this node holds a public-only keyring: it cannot replay escrows")
        }
        self.escrow = escrow
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: "worker.id"] = "\(configuration.workerID)"
        self.logger = logger
        if let host = configuration.cleartextHost {
            // Not fatal: TLS may be terminated by a proxy on the way; but say it, once.
            logger.warning(
                "the backend URL is plain http to a host that is not loopback: profiles cross the network unencrypted",
                metadata: ["backend.host": "\(host)"]
            )
        }
    }

    var actor: AuditActor { .worker(configuration.workerID) }
    var clock: any WallClock { escrow.clock }

    /// Claims are made when fewer than this many claimed escrows wait for a slot (one claim transaction per
    /// batch of deliveries, not one per delivery).
    var claimBatch: Int { max(1, configuration.concurrency / 2) }

    /// What this worker claims: escrows due at `now`, sealed to a master key version its keyring can
    /// open now (an escrow it could not open is left to a worker that can, without using an attempt). While the
    /// keyring's secret keys are still wrapped (its custody engine was down at start) that is none: nothing is
    /// claimed until the ``KeyringReloader`` unwraps them.
    func claim(dueAt now: Date, limit: Int, leaseDuration: Double) async throws -> [EscrowRecord] {
        let openable = escrow.keyring.openableVersions
        let request = ClaimRequest(
            now: now,
            limit: limit,
            owner: configuration.workerID,
            leaseDuration: leaseDuration,
            keyVersions: openable
        )
        return try await EscrowTracing.withSpan(escrow.configuration.tracer, "escrow.claim") { span in
            let claimed = try await escrow.store.claimDue(request, lifecycle: escrow.lifecycle)
            span?.attributes["escrow.claim.limit"] = limit
            span?.attributes["escrow.claim.count"] = claimed.count
            return claimed
        }
    }

    /// Whether deliveries are paused for every node (the store's switch: one read before each claim), published as
    /// the `profile_escrow_deliveries_paused` gauge.
    func deliveriesPaused() async throws -> Bool {
        let paused = try await escrow.store.deliveryControl().paused
        EscrowMetrics.deliveriesPaused(paused)
        return paused
    }

    /// Logs a change of the delivery switch as this worker met it, and gives back the leases of the escrows claimed
    /// ahead of a free slot when deliveries were paused: none of them starts while paused.
    private func switched(paused: Bool, ready: inout [EscrowRecord], run: ReplayRun) async {
        guard paused else {
            logger.notice("deliveries resumed: claiming again")
            return
        }
        logger.notice(
            "deliveries paused: claiming nothing until they are resumed",
            metadata: ["claimed": "\(ready.count)"]
        )
        await release(ready, run: run, because: "deliveries paused")
        ready = []
    }

    /// The pacer of this worker's deliveries under the cluster's rate, after recording the rate in the store (what
    /// `GET /v1/admin/deliveries` shows). A store that fails here is logged: the rate holds all the same.
    func makePacer() async -> DeliveryPacer {
        do {
            try await escrow.store.recordDeliveryRate(configuration.deliveryRate)
        } catch {
            logger.warning("recording the delivery rate failed", metadata: ["error": "\(error)"])
        }
        return DeliveryPacer(store: escrow.store, perSecond: configuration.deliveryRate)
    }

    /// Starts (`start`) deliveries of `ready` escrows while slots of the worker's concurrency and of the cluster's
    /// rate are free. Returns when the next one may start, when the rate held it back (nil otherwise). A store failure
    /// taking slots is logged, and tried again after a poll interval.
    private func startDeliveries(
        _ ready: inout [EscrowRecord],
        pacer: inout DeliveryPacer,
        run: ReplayRun,
        start: (EscrowRecord) -> Void
    ) async -> Date? {
        while !run.isShuttingDown, run.hasFreeSlot, !ready.isEmpty {
            do {
                let now = clock.now()
                if let next = try await pacer.admit(wanting: min(ready.count, configuration.concurrency), at: now) {
                    return next
                }
            } catch {
                logger.error("taking delivery slots failed; trying again", metadata: ["error": "\(error)"])
                return clock.now().addingTimeInterval(configuration.pollInterval)
            }
            run.started()
            start(ready.removeFirst())
        }
        return nil
    }

    // MARK: Service

    /// Delivers until graceful shutdown (or cancellation). Store errors are logged and retried
    /// after the poll interval: a worker outlives a busy or briefly unavailable database. Purged bytes
    /// are flushed from the store's files by a ``PurgeFlusher`` beside it (``EscrowServices`` adds one).
    public func run() async throws {
        let run = ReplayRun(clock: clock, concurrency: configuration.concurrency)
        logger.info(
            "replay worker started",
            metadata: [
                "concurrency": "\(configuration.concurrency)", "lease.seconds": "\(configuration.leaseDuration)",
            ]
        )
        try await BackendClient.with(configuration) { backend in
            await withGracefulShutdownHandler {
                await withDiscardingTaskGroup { group in
                    var nextSweep = clock.now()
                    // Claimed ahead of the free slots (at most `concurrency` wait), so that a slot freed by a
                    // finished delivery never waits for a claim transaction. A claimed escrow waits here at most
                    // until a slot frees, which is at most one delivery timeout: its lease covers that wait too.
                    var ready: [EscrowRecord] = []
                    // When a claim found less than it asked for, the next waits for the poll interval. Every wait of
                    // this loop is counted on the escrow's clock, as what is due is: a test moves the clock instead of
                    // sleeping.
                    var nextClaim = clock.now()
                    let aheadLease = configuration.leaseDuration + configuration.deliveryTimeout
                    let poll = Duration.milliseconds(Int64(configuration.pollInterval * 1000))
                    // Claims failing one after another (the store down, a standby that takes no writes): waits that
                    // double from the poll interval up to `claimBackoffLimit`, one log line each.
                    var claimFailures = 0
                    // The delivery switch as last read, to log (and act on) its changes once.
                    var paused = false
                    var pacer = await makePacer()
                    while !run.isShuttingDown, !Task.isCancelled {
                        var now = clock.now()
                        if now >= nextSweep {
                            await sweep(run)
                            now = clock.now()
                            nextSweep = now.addingTimeInterval(configuration.sweepInterval)
                        }
                        let nextStart = await startDeliveries(&ready, pacer: &pacer, run: run) { record in
                            group.addTask { await self.deliverThenSignal(record, backend: backend, run: run) }
                        }
                        if ready.count < claimBatch, now >= nextClaim {
                            let want = pacer.claimLimit(configuration.concurrency - ready.count)
                            do {
                                let pausedNow = try await deliveriesPaused()
                                if pausedNow != paused {
                                    paused = pausedNow
                                    await switched(paused: paused, ready: &ready, run: run)
                                    pacer.drop()
                                }
                                let claimed =
                                    paused ? [] : try await claim(dueAt: now, limit: want, leaseDuration: aheadLease)
                                if claimFailures > 0 {
                                    logger.notice(
                                        "claiming due escrows works again",
                                        metadata: ["failures": "\(claimFailures)"]
                                    )
                                    claimFailures = 0
                                }
                                await noteAppleExchanges(of: claimed, in: run)
                                ready += claimed
                                if claimed.count < want { nextClaim = clock.now().addingTimeInterval(poll.inSeconds) }
                                if !claimed.isEmpty { continue }  // into the free slots at once
                            } catch {
                                claimFailures += 1
                                let backoff = min(poll * (1 << min(claimFailures - 1, 16)), Self.claimBackoffLimit)
                                logger.error(
                                    "claiming due escrows failed; next attempt after a backoff",
                                    metadata: [
                                        "error": "\(error)", "failures": "\(claimFailures)",
                                        "backoff.seconds": "\(backoff.inSeconds)",
                                    ]
                                )
                                nextClaim = clock.now().addingTimeInterval(max(poll, backoff).inSeconds)
                            }
                        }
                        // Sleep until a delivery ends, shutdown, the next claim or the next sweep.
                        now = clock.now()
                        var wait = min(configuration.pollInterval, nextSweep.timeIntervalSince(now))
                        if ready.count < claimBatch {
                            wait = min(wait, nextClaim.timeIntervalSince(now))
                        }
                        if let nextStart { wait = min(wait, nextStart.timeIntervalSince(now)) }
                        await run.wakeup.wait(seconds: max(0.001, wait))
                    }
                    await release(ready, run: run, because: "shutting down")
                    let unfinished = run.unfinished
                    if unfinished > 0 {
                        logger.info(
                            "replay worker stopping: waiting for deliveries in flight",
                            metadata: ["count": "\(unfinished)"]
                        )
                    }
                }
            } onGracefulShutdown: {
                run.shutDown()
            }
        }
        logger.info("replay worker stopped", metadata: ["summary": "\(run.summary)"])
    }

    // MARK: Once

    /// Delivers every escrow due now (each at most once in this call), sweeps expired escrows
    /// first, flushes purged bytes from the store's files at the end, and returns what happened. Escrows that become due during the call (a short
    /// `Retry-After`, say) wait for the next call. Graceful shutdown stops it early, as ``run()``.
    /// - Parameter progress: called after each delivery with the summary so far.
    public func runOnce(progress: (@Sendable (ReplaySummary) -> Void)? = nil) async throws -> ReplaySummary {
        let run = ReplayRun(clock: clock, concurrency: configuration.concurrency)
        let cutoff = clock.now()
        let swept = try await escrow.sweep(actor: actor)
        run.update { $0.expiredSwept = swept }
        try await escrow.quarantineForgedUnopenable(actor: actor)
        try await BackendClient.with(configuration) { backend in
            try await withGracefulShutdownHandler {
                try await withThrowingDiscardingTaskGroup { group in
                    var exhausted = false
                    var reported = 0
                    // Claimed ahead of the free slots (at most `concurrency` wait), so that a slot freed by a
                    // finished delivery never waits for a claim transaction.
                    var ready: [EscrowRecord] = []
                    var pacer = await makePacer()
                    while true {
                        let nextStart = await startDeliveries(&ready, pacer: &pacer, run: run) { record in
                            group.addTask { await self.deliverThenSignal(record, backend: backend, run: run) }
                        }
                        if !exhausted, !run.isShuttingDown, ready.count < claimBatch {
                            // Due as of the cutoff, so this call ends; leased from now, so a long call
                            // still gives late claims their full lease.
                            let want = pacer.claimLimit(configuration.concurrency - ready.count)
                            let elapsed = clock.now().timeIntervalSince(cutoff)
                            guard try await !deliveriesPaused() else {
                                logger.notice("deliveries are paused: claiming nothing")
                                exhausted = true
                                continue
                            }
                            let claimed = try await claim(
                                dueAt: cutoff,
                                limit: want,
                                leaseDuration: configuration.leaseDuration + max(0, elapsed)
                            )
                            await noteAppleExchanges(of: claimed, in: run)
                            ready += claimed
                            exhausted = claimed.count < want
                            continue
                        }
                        if run.isShuttingDown, !ready.isEmpty {
                            await release(ready, run: run, because: "shutting down")
                            ready = []
                        }
                        if exhausted || run.isShuttingDown, ready.isEmpty, run.unfinished == 0 { break }
                        let untilStart = nextStart.map { $0.timeIntervalSince(clock.now()) } ?? .infinity
                        await run.wakeup.wait(seconds: max(0.001, min(configuration.pollInterval, untilStart)))
                        let summary = run.summary
                        if let progress, summary.delivered != reported {
                            reported = summary.delivered
                            progress(summary)
                        }
                    }
                }
            } onGracefulShutdown: {
                run.shutDown()
            }
        }
        let summary = run.summary
        if summary.confirmed + summary.expiredSwept > 0 {
            do {
                try await escrow.store.flushPurged()
            } catch {
                logger.error("flushing purged escrows failed", metadata: ["error": "\(error)"])
            }
        }
        logger.info("replay run finished", metadata: ["summary": "\(summary)"])
        return summary
    }

    // MARK: Housekeeping

    /// Notes which `claimed` escrows have no Apple token exchange, with one read for the batch, so that their
    /// deliveries read none. When the read fails nothing is noted: each delivery reads its own, as it would alone.
    private func noteAppleExchanges(of claimed: [EscrowRecord], in run: ReplayRun) async {
        guard !claimed.isEmpty else { return }
        let ids = claimed.map(\.id)
        do {
            let exchanged = try await escrow.escrowIDsWithAppleExchanges(among: ids)
            run.noteWithoutAppleExchanges(ids.lazy.filter { !exchanged.contains($0) })
        } catch {
            logger.debug("reading the claim's Apple token exchanges failed", metadata: ["error": "\(error)"])
        }
    }

    /// Gives back the leases of escrows claimed but not started, each logged with its id and index prefix.
    private func release(_ records: [EscrowRecord], run: ReplayRun, because reason: String) async {
        for record in records {
            _ = run.takeWithoutAppleExchange(record.id)
            await release(
                record,
                run: run,
                because: reason,
                metadata: ["escrow.id": "\(record.id)", "escrow.index": "\(record.blindIndex.prefixHex)"]
            )
        }
    }

    /// One delivery task: deliver, then free the slot and wake the run loop.
    private func deliverThenSignal(_ record: EscrowRecord, backend: BackendClient, run: ReplayRun) async {
        let answered = await deliver(record, backend: backend, run: run)
        run.finished(answered: answered)
    }

    /// Purges what is past retention (`expired`), moves rows sealed to a version this worker cannot open whose MAC
    /// fails to dead, and publishes the live gauges.
    private func sweep(_ run: ReplayRun) async {
        do {
            let swept = try await escrow.sweep(actor: actor)
            if swept > 0 { run.update { $0.expiredSwept += swept } }
            try await escrow.quarantineForgedUnopenable(actor: actor)
            let now = clock.now()
            EscrowMetrics.live(try await escrow.store.summary(at: now), at: now)
        } catch {
            logger.error("retention sweep failed", metadata: ["error": "\(error)"])
        }
    }
}
