import EscrowCore
import EscrowCrypto
import Foundation
import Logging
import Tracing

extension ReplayWorker {
    /// What became of a delivery's outcome in the store.
    enum DeliveryResult: Equatable {
        case confirmed, accepted, retried, dead
        /// The lease was lost (taken over, or the escrow purged meanwhile): nothing changed.
        case stale
        /// The store failed: the outcome is unknown (a commit answered as failed may still be on disk); if it was not
        /// recorded, the lease runs out and the escrow is delivered again.
        case failed
    }

    /// Delivers one leased escrow and commits the outcome with the lease's fencing token.
    ///
    /// Just before the request is sent, at least the delivery timeout must be left of the lease
    /// (otherwise the lease is given back unattempted), and the whole exchange must end a margin
    /// before the lease does: `deadline = min(now + deliveryTimeout, leaseEnd - leaseMargin)`. So the
    /// lease cannot run out (and another worker take over) while this request is in flight.
    ///
    /// Returns whether the request was sent, in which case ``ReplayRun/answered()`` freed its slot as soon as
    /// the exchange ended, before the outcome's commit.
    @discardableResult
    func deliver(_ record: EscrowRecord, backend: BackendClient, run: ReplayRun?) async -> Bool {
        // Each delivery is a trace of its own (the worker's task carries no span): the exchange and the commit are
        // its children, and the backend continues it from the request's `traceparent`.
        await EscrowTracing.withSpan(escrow.configuration.tracer, "escrow.delivery") { span in
            span?.attributes["escrow.id"] = record.id.hex
            span?.attributes["escrow.attempt"] = record.attempts + 1
            return await deliverInSpan(record, backend: backend, run: run)
        }
    }

    private func deliverInSpan(_ record: EscrowRecord, backend: BackendClient, run: ReplayRun?) async -> Bool {
        // The attempt this delivery would be: attempts count requests sent, not leases.
        let attempt = record.attempts + 1
        // Taken first, whatever happens to this delivery, so that the note does not outlive it.
        let withoutAppleExchange = run?.takeWithoutAppleExchange(record.id) ?? false
        // Room for everything the delivery's line adds (its outcome, status, duration, error, and the commit's
        // reason), so that the dictionary is never grown again on the way.
        var metadata = Logger.Metadata(minimumCapacity: 10)
        metadata["escrow.id"] = .string(record.id.hex)
        metadata["escrow.index"] = .string(record.blindIndex.prefixHex)
        metadata["attempt"] = .string(String(attempt))
        guard run?.isShuttingDown != true else {
            await release(record, run: run, because: "shutting down", metadata: metadata)
            return false
        }
        // Checked once now (not worth opening the escrow otherwise), and again right before sending.
        guard let leaseEnd = record.leaseExpiresAt, deliveryBudget(leaseEnd: leaseEnd, now: clock.now()) != nil else {
            await release(record, run: run, because: "too little of the lease is left", metadata: metadata)
            return false
        }

        let body: [UInt8]
        do {
            let plaintext = try await escrow.open(record, actor: actor)
            // The refresh token the sign-in's code was exchanged for, when it was: only ever in this signed body.
            // Read only for an escrow that has an exchange (or when the claim's batch read failed).
            let appleTokens =
                withoutAppleExchange ? nil : try await escrow.appleTokens(for: record, at: clock.now())
            body = plaintext.backendJSON(escrowId: record.id.hex, attempt: attempt, appleTokens: appleTokens)
        } catch let error as EscrowError where error.code == .ciphertextInvalid {
            // `open` moved it to dead (ciphertext_invalid) and logged it.
            run?.update { $0.dead += 1 }
            return false
        } catch let error as EscrowError where error.code == .keyUnavailable {
            // The keyring changed since the claim (claims ask only for versions it can open): give the
            // escrow back at once, without an attempt, for a worker that can open it.
            await release(record, run: run, because: "this keyring cannot open its key version", metadata: metadata)
            return false
        } catch {
            // A store failure: the lease runs out and the escrow is tried again later (not at once: that
            // would spin).
            logger.error(
                "cannot open the escrow; its lease will run out",
                metadata: metadata.merging(["error": "\(error)"]) { $1 }
            )
            run?.update { $0.failed += 1 }
            return false
        }
        guard run?.isShuttingDown != true else {
            await release(record, run: run, because: "shutting down", metadata: metadata)
            return false
        }
        // Again after opening the escrow (which may have waited on the store), right before sending.
        guard let budget = deliveryBudget(leaseEnd: leaseEnd, now: clock.now()) else {
            await release(record, run: run, because: "too little of the lease is left", metadata: metadata)
            return false
        }

        let started = ContinuousClock.now
        var answer = await backend.deliver(
            body: body,
            escrowID: record.id.hex,
            within: budget,
            now: clock.now(),
            tracer: escrow.configuration.tracer
        )
        if answer.timedOut {
            // The backend may still be working on the request it did not answer in time: the lifecycle
            // waits at least one delivery timeout before the next attempt.
            answer.outcome = .timedOut(deadline: configuration.deliveryTimeout)
        }
        let elapsed = ContinuousClock.now - started
        run?.answered()
        let seconds = elapsed.inSeconds
        EscrowMetrics.delivered(answer.outcome, seconds: seconds)
        run?.update { $0.delivered += 1 }

        var logged = metadata
        logged["outcome"] = "\(answer.outcome.auditName)"
        if let status = answer.outcome.status { logged["http.status"] = "\(status)" }
        if let failure = answer.failure { logged["error"] = "\(failure)" }
        logged["duration.ms"] = "\(Int(seconds * 1000))"
        if answer.bodyCutOff { logged["body"] = "cut off at the deadline" }

        if Task.isCancelled, answer.failure != nil {
            // Cancelled (not a graceful shutdown): the outcome is unknown, leave the lease to run out.
            logger.info("escrow delivered", metadata: logged)
            return true
        }
        let result = await commit(answer.outcome, for: record, metadata: logged)
        // One line per delivery: a confirmed one is the "escrow purged" line, which carries the same fields.
        if result != .confirmed { logger.info("escrow delivered", metadata: logged) }
        run?.update { summary in
            switch result {
            case .confirmed: summary.confirmed += 1
            case .accepted: summary.accepted += 1
            case .retried: summary.retried += 1
            case .dead: summary.dead += 1
            case .stale: summary.stale += 1
            case .failed: summary.failed += 1
            }
        }
        return true
    }

    /// How long the delivery of an escrow leased until `leaseEnd` may take from `now`: the delivery
    /// timeout, but ending ``Configuration/leaseMargin`` before the lease does. Nil (do not send)
    /// when less than the delivery timeout is left of the lease.
    func deliveryBudget(leaseEnd: Date, now: Date) -> Double? {
        let left = leaseEnd.timeIntervalSince(now)
        guard left >= configuration.deliveryTimeout else { return nil }
        return min(configuration.deliveryTimeout, left - configuration.leaseMargin)
    }

    /// Records the backend's answer with compare-and-set on the lease's revision (its fencing
    /// token). When the escrow changed since it was leased, nothing is written.
    func commit(_ outcome: DeliveryOutcome, for record: EscrowRecord, metadata: Logger.Metadata) async -> DeliveryResult
    {
        // The jitter of a retry's backoff: drawn only for an outcome that is retried (each draw is a `getrandom`
        // system call, one per confirmed delivery for nothing).
        let retried: Bool
        switch outcome {
        case .retry, .timedOut: retried = true
        case .confirmed, .accepted, .rejected: retried = false
        }
        let event = LifecycleEvent.delivered(
            outcome,
            fencingToken: record.revision,
            unitRandom: retried ? Double.random(in: 0...1) : 0
        )
        let action = escrow.lifecycle.handle(event, on: record, at: clock.now(), actor: actor)
        do {
            let committed = try await EscrowTracing.withSpan(escrow.configuration.tracer, "escrow.commit") { span in
                span?.attributes["escrow.delivery.outcome"] = outcome.auditName
                return try await escrow.commit(action, on: record, metadata: metadata)
            }
            switch committed {
            case .applied: break
            case .stale, .ignored:
                logger.warning(
                    "stale lease: the escrow changed since it was leased; this outcome is discarded",
                    metadata: metadata.merging(["fencing.token": "\(record.revision)"]) { $1 }
                )
                return .stale
            }
        } catch {
            logger.error(
                "recording the delivery outcome failed, its outcome unknown: if not recorded, the escrow is delivered again after its lease",
                metadata: metadata.merging(["error": "\(error)"]) { $1 }
            )
            return .failed
        }
        switch action.change {
        case .purge: return .confirmed
        case .update(let next, _):
            switch next.phase {
            case .awaitingConfirmation: return .accepted
            case .dead: return .dead
            case .pending, .leased: return .retried
            }
        case .ignore: return .stale
        }
    }

    /// Gives an unattempted lease back (compare-and-set; a lost lease is left alone).
    func release(_ record: EscrowRecord, run: ReplayRun?, because reason: String, metadata: Logger.Metadata) async {
        do {
            let event = LifecycleEvent.release(fencingToken: record.revision)
            if try await escrow.apply(event, to: record, actor: actor) == .applied {
                run?.update { $0.released += 1 }
                logger.info("lease released", metadata: metadata.merging(["reason": "\(reason)"]) { $1 })
            }
        } catch {
            logger.error(
                "releasing a lease failed; it will run out",
                metadata: metadata.merging(["error": "\(error)"]) { $1 }
            )
        }
    }
}
