internal import EscrowCrypto
public import Foundation

/// What happened to a delivery, as the replay worker classifies the backend's answer (SPEC §7).
public enum DeliveryOutcome: Sendable, Equatable {
    /// `200`, `201`, `204` or `409`.
    case confirmed(status: Int)
    /// `202`: wait for a confirm call.
    case accepted(status: Int)
    /// `408`, `425`, `429`, `5xx`, a timeout, reset or refused connection (`status` nil).
    case retry(status: Int?, retryAfter: Double?)
    /// `410` and any other `4xx`.
    case rejected(status: Int)

    /// The audit `detail` of a `delivery-attempted` event.
    public var auditName: String {
        switch self {
        case .confirmed: "confirmed"
        case .accepted: "accepted"
        case .retry: "retry"
        case .rejected: "rejected"
        }
    }

    public var status: Int? {
        switch self {
        case .confirmed(let status), .accepted(let status), .rejected(let status): status
        case .retry(let status, _): status
        }
    }

    /// Classifies an HTTP status code.
    public static func classify(status: Int, retryAfter: Double?) -> DeliveryOutcome {
        switch status {
        case 200, 201, 204, 409: .confirmed(status: status)
        case 202: .accepted(status: status)
        case 408, 425, 429, 500...599: .retry(status: status, retryAfter: retryAfter)
        case 400...499: .rejected(status: status)
        default: .retry(status: status, retryAfter: retryAfter)  // 1xx/3xx (redirects are not followed)
        }
    }
}

/// An event that may change an escrow.
public enum LifecycleEvent: Sendable, Equatable {
    /// A worker takes the escrow for delivery.
    case lease(owner: String, duration: Double)
    /// The lease holder reports the backend's answer; `fencingToken` is the revision of its lease.
    case delivered(DeliveryOutcome, fencingToken: Int64, unitRandom: Double)
    /// The lease holder gives the escrow back unattempted (graceful shutdown).
    case release(fencingToken: Int64)
    /// A confirm call (library, CLI, HTTP): success, then purge.
    case confirm
    /// Purge for a reason other than confirmation.
    case purge(PurgeReason)
    /// The row failed its MAC or did not open.
    case tampered
    /// An operator brings a dead escrow back.
    case requeue
}

/// What the caller must do after an event: the state machine does no I/O of its own.
public enum LifecycleAction: Sendable, Equatable {
    /// Store this record (compare-and-set on the old revision) and append these events.
    case update(EscrowRecord, [AuditDraft])
    /// Delete the row and append these events, in one transaction.
    case purge(PurgeReason, [AuditDraft])
    /// Nothing changes (a stale fencing token, or an event that does not apply in this state).
    case ignore(LifecycleRejection)
}

/// Why an event did not apply.
public enum LifecycleRejection: String, Sendable, Equatable {
    case staleLease = "stale_lease"
    case notDue = "not_due"
    case notDead = "not_dead"
    case notLeased = "not_leased"
}

/// The escrow lifecycle as a value: `(record, event, now) -> action`. Tested without I/O.
public struct EscrowLifecycle: Sendable {
    public var policy: RetryPolicy
    /// How long to wait for a confirm call after a `202` before delivering again, in seconds.
    public var confirmTimeout: Double

    public init(policy: RetryPolicy = RetryPolicy(), confirmTimeout: Double = 3600) {
        self.policy = policy
        self.confirmTimeout = confirmTimeout
    }

    public func handle(
        _ event: LifecycleEvent,
        on record: EscrowRecord,
        at now: Date,
        actor: AuditActor
    )
        -> LifecycleAction
    {
        guard record.state != .purged else { return .ignore(.notDue) }
        func draft(_ type: AuditEventType, detail: String? = nil, status: Int? = nil) -> AuditDraft {
            AuditDraft(
                type: type,
                at: now,
                escrowID: record.id.hex,
                indexPrefix: record.blindIndex.prefixHex,
                detail: detail,
                httpStatus: status,
                actor: actor
            )
        }
        func purged(_ reason: PurgeReason, before: [AuditDraft] = []) -> LifecycleAction {
            var event = draft(.purged, detail: reason.rawValue)
            event.ageMilliseconds = max(0, AuditChain.milliseconds(now) - AuditChain.milliseconds(record.createdAt))
            return .purge(reason, before + [event])
        }
        var next = record
        next.revision = record.revision + 1
        next.updatedAt = now

        switch event {
        case .lease(let owner, let duration):
            guard record.isDue(at: now) else { return .ignore(.notDue) }
            next.state = .leased
            next.attempts = record.attempts + 1
            next.leaseOwner = owner
            next.leaseExpiresAt = now.addingTimeInterval(duration)
            next.confirmDeadline = nil
            return .update(next, [])

        case .delivered(let outcome, let token, let unitRandom):
            guard record.state == .leased, record.revision == token else { return .ignore(.staleLease) }
            let attempted = draft(.deliveryAttempted, detail: outcome.auditName, status: outcome.status)
            next.leaseOwner = nil
            next.leaseExpiresAt = nil
            next.lastStatus = outcome.status
            switch outcome {
            case .confirmed:
                return purged(.confirmed, before: [attempted, draft(.confirmed, status: outcome.status)])
            case .accepted:
                next.state = .awaitingConfirmation
                next.confirmDeadline = now.addingTimeInterval(confirmTimeout)
                return .update(next, [attempted, draft(.awaitingConfirmation, status: outcome.status)])
            case .retry(_, let retryAfter):
                if record.attempts >= policy.maxAttempts {
                    next.state = .dead
                    next.deadCode = .attemptsExhausted
                    return .update(next, [attempted, draft(.dead, detail: DeadCode.attemptsExhausted.rawValue)])
                }
                next.state = .pending
                let delay = policy.delay(afterAttempt: record.attempts, retryAfter: retryAfter, unitRandom: unitRandom)
                next.nextAttemptAt = now.addingTimeInterval(delay)
                return .update(next, [attempted])
            case .rejected(let status):
                next.state = .dead
                next.deadCode = .rejected
                return .update(next, [attempted, draft(.dead, detail: DeadCode.rejected.rawValue, status: status)])
            }

        case .release(let token):
            guard record.state == .leased, record.revision == token else { return .ignore(.staleLease) }
            next.state = .pending
            next.attempts = max(0, record.attempts - 1)
            next.leaseOwner = nil
            next.leaseExpiresAt = nil
            next.nextAttemptAt = now
            return .update(next, [])

        case .confirm:
            return purged(.confirmed, before: [draft(.confirmed)])

        case .purge(let reason):
            return purged(reason)

        case .tampered:
            guard record.state != .dead || record.deadCode != .ciphertextInvalid else { return .ignore(.notDue) }
            next.state = .dead
            next.deadCode = .ciphertextInvalid
            next.leaseOwner = nil
            next.leaseExpiresAt = nil
            return .update(next, [draft(.dead, detail: DeadCode.ciphertextInvalid.rawValue)])

        case .requeue:
            guard record.state == .dead else { return .ignore(.notDead) }
            next.state = .pending
            next.attempts = 0
            next.deadCode = nil
            next.nextAttemptAt = now
            next.confirmDeadline = nil
            return .update(next, [draft(.requeued)])
        }
    }
}
