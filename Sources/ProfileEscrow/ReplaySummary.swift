/// What one replay run did: the summary line of `profile-escrow replay --once`.
public struct ReplaySummary: Sendable, Equatable, CustomStringConvertible {
    /// Deliveries sent to the backend (each one HTTP request, answered or not).
    public var delivered = 0
    /// Confirmed (`200`, `201`, `204`, `409`) and purged.
    public var confirmed = 0
    /// Accepted (`202`): now awaiting a confirm call.
    public var accepted = 0
    /// To be retried later (`408`, `425`, `429`, `5xx`, other statuses, timeouts, network errors).
    public var retried = 0
    /// Moved to `dead`: rejected (`4xx`), attempts exhausted, or a ciphertext that failed to open.
    public var dead = 0
    /// Purged as `expired` by the worker's retention sweep.
    public var expiredSwept = 0
    /// Outcomes discarded because the lease had been lost (another worker took the escrow over,
    /// or it was purged meanwhile): the fencing rule at work.
    public var stale = 0
    /// Leases given back unattempted (shutdown, or too little lease left to deliver safely).
    public var released = 0
    /// Outcomes whose recording failed (a store error), their outcome unknown: one not recorded is delivered again
    /// once its lease runs out, with the same `Idempotency-Key`; one that reached the disk all the same stands.
    public var failed = 0

    public init() {}

    public var description: String {
        var text =
            "delivered \(delivered): \(confirmed) confirmed, \(accepted) accepted, \(retried) retried, \(dead) dead; "
            + "\(expiredSwept) expired swept"
        if stale > 0 { text += "; \(stale) stale" }
        if released > 0 { text += "; \(released) released" }
        if failed > 0 { text += "; \(failed) not known recorded" }
        return text
    }
}
