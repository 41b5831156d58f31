public import EscrowCrypto
public import Foundation

/// An event that may change an escrow.
public enum LifecycleEvent: Sendable, Equatable {
    /// A worker takes the escrow for delivery.
    case lease(owner: String, duration: Double)
    /// The lease holder reports the backend's answer; `fencingToken` is the revision of its lease.
    case delivered(DeliveryOutcome, fencingToken: Int64, unitRandom: Double)
    /// The lease holder gives the escrow back without sending anything (graceful shutdown, too
    /// little lease left): no attempt is used.
    case release(fencingToken: Int64)
    /// A confirm call (library, CLI, HTTP): success, then purge.
    case confirm
    /// Purge for a reason other than confirmation or replacement.
    case purge(PurgeReason)
    /// A newer capture of the same user with other content supersedes this escrow.
    case replace(by: EscrowID)
    /// The row failed its MAC, did not open, or is malformed.
    case tampered
    /// An operator brings a dead escrow back.
    case requeue
    /// Key rotation: the escrow key re-sealed to another master key version (payload untouched).
    case rewrap(SealedEscrow)
    /// The profile itself changed (an Apple email notification): sealed anew under the same id.
    case reseal(SealedEscrow, contentTag: [UInt8], detail: String)
}

/// What the caller must do after an event: the state machine does no I/O of its own.
///
/// Only ``EscrowLifecycle`` makes actions (its initializer is internal to this module): a store, the facade and
/// the tests apply what the lifecycle decided and can never build a changed record of their own.
public struct LifecycleAction: Sendable, Equatable {
    /// The change itself.
    public enum Change: Sendable, Equatable {
        /// Store this record (compare-and-set on the old revision) and append these events.
        case update(EscrowRecord, [AuditDraft])
        /// Delete the row and append these events, in one transaction.
        case purge(PurgeReason, [AuditDraft])
        /// Nothing changes (a stale fencing token, or an event that does not apply in this state).
        case ignore(LifecycleRejection)
    }

    public let change: Change

    init(_ change: Change) {
        self.change = change
    }

    static func update(_ record: EscrowRecord, _ drafts: [AuditDraft]) -> LifecycleAction {
        LifecycleAction(.update(record, drafts))
    }

    static func purge(_ reason: PurgeReason, _ drafts: [AuditDraft]) -> LifecycleAction {
        LifecycleAction(.purge(reason, drafts))
    }

    static func ignore(_ why: LifecycleRejection) -> LifecycleAction {
        LifecycleAction(.ignore(why))
    }

    /// The audit events the change appends (none for `ignore`).
    public var auditDrafts: [AuditDraft] {
        switch change {
        case .update(_, let drafts), .purge(_, let drafts): drafts
        case .ignore: []
        }
    }
}

/// Why an event did not apply.
public enum LifecycleRejection: String, Sendable, Equatable {
    /// The fencing token is not the record's revision, or the record is no longer leased.
    case staleLease = "stale_lease"
    /// Not due yet (a lease), or already in the state the event would put it in.
    case notDue = "not_due"
    /// A requeue of an escrow that is not dead.
    case notDead = "not_dead"
    /// A rewrap or reseal whose sealed bytes belong to another escrow.
    case otherEscrow = "other_escrow"
}

/// The escrow lifecycle as a value: `(record, event, now) -> action`. Tested without I/O.
///
/// The only place that decides how an escrow changes: every store applies the actions it returns
/// and never builds a changed record itself, so two stores cannot diverge.
public struct EscrowLifecycle: Sendable {
    public var policy: RetryPolicy
    /// How long to wait for a confirm call after a `202` before delivering again, in seconds.
    public var confirmTimeout: Double

    /// ``confirmTimeout`` when none is given: an hour. `EscrowConfiguration` takes its default from here.
    public static let defaultConfirmTimeout: Double = 3600

    public init(policy: RetryPolicy = RetryPolicy(), confirmTimeout: Double = defaultConfirmTimeout) {
        self.policy = policy
        self.confirmTimeout = confirmTimeout
    }

    /// The `captured` event of a new escrow; `detail` says how the profile came when not by a capture call
    /// (`web-signin`: a web sign-in's callback).
    public func captured(_ record: EscrowRecord, actor: AuditActor, detail: String? = nil) -> AuditDraft {
        AuditDraft(
            type: .captured,
            at: record.createdAt,
            escrowID: record.id.hex,
            indexPrefix: record.blindIndex.prefixHex,
            detail: detail,
            actor: actor
        )
    }

    /// A capture of `record` for a user whose live escrow is `existing`: `nil` when it holds the same profile (the
    /// capture changes nothing), else the audit drafts of the previous escrow's purge, which the store deletes in
    /// the capture's transaction before it inserts `record` (and its ``captured(_:actor:)``).
    public func replacement(
        of existing: EscrowRecord,
        by record: EscrowRecord,
        actor: AuditActor
    ) throws(EscrowStoreError) -> [AuditDraft]? {
        if Hashing.constantTimeEqual(existing.contentTag, record.contentTag) { return nil }
        guard
            case .purge(_, let drafts) = handle(
                .replace(by: record.id),
                on: existing,
                at: record.createdAt,
                actor: actor
            ).change
        else {
            throw EscrowStoreError(.failed, "cannot replace the previous escrow")
        }
        return drafts
    }

    public func handle(
        _ event: LifecycleEvent,
        on record: EscrowRecord,
        at now: Date,
        actor: AuditActor
    )
        -> LifecycleAction
    {
        // Encoded once, when a draft is made: a confirmed delivery makes one (a lease none).
        lazy var escrowID = record.id.hex
        lazy var indexPrefix = record.blindIndex.prefixHex
        func draft(_ type: AuditEventType, detail: String? = nil, status: Int? = nil) -> AuditDraft {
            AuditDraft(
                type: type,
                at: now,
                escrowID: escrowID,
                indexPrefix: indexPrefix,
                detail: detail,
                httpStatus: status,
                actor: actor
            )
        }
        func purged(_ reason: PurgeReason, status: Int? = nil, before: [AuditDraft] = []) -> LifecycleAction {
            var event = draft(.purged, detail: reason.rawValue, status: status)
            event.ageMilliseconds = max(
                0,
                Timestamp.unixMilliseconds(now) - Timestamp.unixMilliseconds(record.createdAt)
            )
            return .purge(reason, before + [event])
        }
        var next = record
        next.revision = record.revision + 1
        next.updatedAt = now

        switch event {
        case .lease(let owner, let duration):
            guard record.isDue(at: now) else { return .ignore(.notDue) }
            // A lease that ran out may have sent its request: its outcome is lost, count the attempt.
            if case .leased = record.phase { next.attempts = record.attempts + 1 }
            next.phase = .leased(Lease(owner: owner, expiresAt: now.addingTimeInterval(duration)))
            return .update(next, [])

        case .delivered(let outcome, let token, let unitRandom):
            guard case .leased = record.phase, record.revision == token else { return .ignore(.staleLease) }
            next.attempts = record.attempts + 1
            next.lastStatus = outcome.status
            lazy var attempted = draft(.deliveryAttempted, detail: outcome.auditName, status: outcome.status)
            switch outcome {
            case .confirmed(let status):
                // One event says it all: a `purged` whose reason is `confirmed` and which carries the delivery's
                // status is a delivery the backend confirmed, purged in the same transaction. Earlier versions
                // wrote `delivery-attempted`, `confirmed` and `purged` for it (docs/FORMAT.md, "Audit events").
                return purged(.confirmed, status: status)
            case .accepted:
                next.phase = .awaitingConfirmation(deadline: now.addingTimeInterval(confirmTimeout))
                return .update(next, [attempted, draft(.awaitingConfirmation, status: outcome.status)])
            case .retry, .timedOut:
                if next.attempts >= policy.maxAttempts {
                    next.phase = .dead(.attemptsExhausted)
                    return .update(next, [attempted, draft(.dead, detail: DeadCode.attemptsExhausted.rawValue)])
                }
                next.phase = .pending
                next.nextAttemptAt = now.addingTimeInterval(delay(after: outcome, attempt: next.attempts, unitRandom))
                return .update(next, [attempted])
            case .rejected(let status):
                next.phase = .dead(.rejected)
                return .update(next, [attempted, draft(.dead, detail: DeadCode.rejected.rawValue, status: status)])
            }

        case .release(let token):
            guard case .leased = record.phase, record.revision == token else { return .ignore(.staleLease) }
            next.phase = .pending
            next.nextAttemptAt = now
            return .update(next, [])

        case .confirm:
            // A `purged` (confirmed) without a status: the backend confirmed by a call, after an accepted delivery.
            return purged(.confirmed)

        case .purge(let reason):
            return purged(reason)

        case .replace(let replacement):
            return purged(.replaced, before: [draft(.replaced, detail: replacement.hex)])

        case .tampered:
            guard record.deadCode != .ciphertextInvalid else { return .ignore(.notDue) }
            next.phase = .dead(.ciphertextInvalid)
            return .update(next, [draft(.dead, detail: DeadCode.ciphertextInvalid.rawValue)])

        case .requeue:
            guard case .dead = record.phase else { return .ignore(.notDead) }
            next.phase = .pending
            next.attempts = 0
            next.nextAttemptAt = now
            return .update(next, [draft(.requeued)])

        case .rewrap(let sealed):
            guard sealed.id == record.id, sealed.blindIndex == record.blindIndex else { return .ignore(.otherEscrow) }
            next.sealed = sealed
            return .update(next, [])

        case .reseal(let sealed, let contentTag, let detail):
            guard sealed.id == record.id, sealed.blindIndex == record.blindIndex else { return .ignore(.otherEscrow) }
            next.sealed = sealed
            next.contentTag = contentTag
            return .update(next, [draft(.updated, detail: detail)])
        }
    }

    /// The wait before the next attempt: `Retry-After` when the backend sent one, otherwise
    /// exponential backoff with full jitter; after a timeout at least the delivery deadline, since
    /// the backend may still be working on the request it did not answer in time.
    func delay(after outcome: DeliveryOutcome, attempt: Int, _ unitRandom: Double) -> Double {
        switch outcome {
        case .retry(_, let retryAfter):
            return policy.delay(afterAttempt: attempt, retryAfter: retryAfter, unitRandom: unitRandom)
        case .timedOut(let deadline):
            return max(policy.delay(afterAttempt: attempt, retryAfter: nil, unitRandom: unitRandom), deadline)
        case .confirmed, .accepted, .rejected:
            return 0
        }
    }
}
