import EscrowCrypto
package import Foundation

/// The statements a store runs for web sign-in attempts, inside an ``EscrowWriteTransaction``.
package protocol SignInWriteTransaction: AppleTokenWriteTransaction {
    func insertSignInAttempt(_ attempt: SignInAttempt) async throws
    /// The attempt with this state hash, locked until the transaction ends where the store locks rows.
    func signInAttempt(stateHash: [UInt8]) async throws -> SignInAttempt?
    /// Marks an attempt used and stores its ticket, keeping the row until the ticket's expiry when that is after the
    /// attempt's; returns false, changing nothing, when it was used already, is gone, or is not stored as given
    /// (binding hash, started by an app, expiry).
    func useSignInAttempt(_ attempt: SignInAttempt, at now: Date, ticket: SignInTicket) async throws -> Bool
    /// Replaces the ticket of an attempt this transaction used, keeping the row until the ticket's expiry.
    func reissueSignInTicket(_ attempt: SignInAttempt, ticket: SignInTicket) async throws
    /// Erases and returns an unredeemed ticket's result when it is not past its expiry at `now`, and its attempt was
    /// started by a browser or its binding hash is `starterHash`.
    func redeemSignInTicket(_ key: SignInTicketKey, starterHash: [UInt8]?, at now: Date) async throws
        -> SignInRedemption?
    /// Deletes attempts past their expiry, and past their ticket's when used; returns how many.
    func deleteSignInAttempts(expiredAt now: Date) async throws -> Int
}

extension StoreEngine {
    /// A callback's completion in the caller's transaction: the attempt is read locked and checked, the profile
    /// captured, and the attempt marked used with its ticket (which names the escrow), so two callbacks with one
    /// state never both capture.
    package static func completeSignIn(
        _ request: SignInCompletionRequest,
        capture item: CaptureItem?,
        in transaction: some SignInWriteTransaction
    ) async throws -> SignInCompletion {
        try await completeSignIns([SignInCompletionItem(request: request, capture: item)], in: transaction)[0]
    }

    /// One completion of ``completeSignIns(_:in:)``: its audit events are added to `audit`, its key version to
    /// `keyVersions`.
    ///
    /// When the caller read the attempt already (``SignInCompletionRequest/attempt``) and found it live and of this
    /// binding, the attempt is used first, with the ticket of the escrow about to be captured: one statement, which
    /// finds it unused or changes nothing (the store locks the row, or serializes writers), instead of a read and then
    /// a write. Only when that changes nothing (used or swept since, expired, or stored otherwise than the caller's
    /// copy) is the attempt read, to say why, and nothing is captured. When the capture keeps an escrow already held
    /// (``CaptureOutcome/unchanged(_:)``), the ticket is issued again, naming it.
    private static func completeSignIn(
        _ request: SignInCompletionRequest,
        capture item: CaptureItem?,
        in transaction: some SignInWriteTransaction,
        auditing audit: inout [AuditDraft],
        keyVersions: inout Set<UInt32>
    ) async throws -> SignInCompletion {
        let attempt: SignInAttempt
        // Whether the attempt was used, with a ticket naming the escrow about to be captured, before the capture.
        let usedFirst: Bool
        if let held = request.attempt, held.stateHash == request.stateHash, held.isLive(at: request.receivedAt),
            held.accepts(bindingHash: request.bindingHash),
            try await transaction.useSignInAttempt(held, at: request.now, ticket: request.ticket(item?.record.id))
        {
            attempt = held
            usedFirst = true
        } else {
            guard let stored = try await transaction.signInAttempt(stateHash: request.stateHash) else { return .unknown }
            guard stored.isLive(at: request.receivedAt) else { return .expired(stored) }
            guard stored.accepts(bindingHash: request.bindingHash) else { return .bindingMismatch(stored) }
            attempt = stored
            usedFirst = false
        }
        var outcome: CaptureOutcome?
        if var item {
            // One event says it all: the escrow's `captured`, whose detail names the web sign-in.
            item.detail = CaptureItem.webSignIn
            // The code Apple gave with the profile, queued for its exchange with the capture it belongs to.
            if let exchange = request.appleExchange {
                outcome = try await capture(item, queueing: exchange, in: transaction, auditing: &audit)
            } else {
                outcome = try await capture([item], in: transaction, auditing: &audit).first
            }
            keyVersions.insert(item.record.sealed.keyVersion)
        }
        let escrowID = outcome?.record.id
        if usedFirst {
            // The capture kept an escrow already held (or captured none): the ticket names what is held.
            if item?.record.id != escrowID {
                try await transaction.reissueSignInTicket(attempt, ticket: request.ticket(escrowID))
            }
        } else {
            // The attempt is locked (or the store serializes writers): it cannot have been used since it was read.
            guard try await transaction.useSignInAttempt(attempt, at: request.now, ticket: request.ticket(escrowID))
            else { throw EscrowStoreError(.failed, "the sign-in attempt was used during its completion; try again") }
        }
        var used = attempt
        used.usedAt = request.now
        return .completed(used, outcome)
    }
}

/// One callback's completion, as a store's group commit queues it.
package struct SignInCompletionItem: Sendable {
    package let request: SignInCompletionRequest
    package let capture: CaptureItem?

    package init(request: SignInCompletionRequest, capture: CaptureItem?) {
        self.request = request
        self.capture = capture
    }
}

/// Concurrent callbacks' completions in one transaction (one fsync): each as ``StoreEngine/completeSignIn(_:capture:in:)``
/// would in its own, in order, so two callbacks of one state in one batch capture once.
package typealias SignInBatcher = GroupCommit<SignInCompletionItem, SignInCompletion>

extension StoreEngine {
    package static func completeSignIns(
        _ items: [SignInCompletionItem],
        in transaction: some SignInWriteTransaction
    ) async throws -> [SignInCompletion] {
        var results: [SignInCompletion] = []
        results.reserveCapacity(items.count)
        // The audit events of every completion are chained in one append, and the key versions checked once, after
        // the last write, as a capture batch does.
        var audit: [AuditDraft] = []
        var keyVersions: Set<UInt32> = []
        for item in items {
            results.append(
                try await completeSignIn(
                    item.request,
                    capture: item.capture,
                    in: transaction,
                    auditing: &audit,
                    keyVersions: &keyVersions
                )
            )
        }
        try await transaction.requireUsable(keyVersions)
        try await append(audit, transaction)
        return results
    }
}
