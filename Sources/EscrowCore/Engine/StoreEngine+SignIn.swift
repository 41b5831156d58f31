import EscrowCrypto
package import Foundation

/// The statements a store runs for web sign-in attempts, inside an ``EscrowWriteTransaction``.
package protocol SignInWriteTransaction: AppleTokenWriteTransaction {
    func insertSignInAttempt(_ attempt: SignInAttempt) async throws
    /// The attempt with this state hash, locked until the transaction ends where the store locks rows.
    func signInAttempt(stateHash: [UInt8]) async throws -> SignInAttempt?
    /// Marks a live attempt (as read in this transaction) used and stores its ticket, keeping the row until the
    /// ticket's expiry when that is after the attempt's; returns false when it was used already.
    func useSignInAttempt(_ attempt: SignInAttempt, at now: Date, ticket: SignInTicket) async throws -> Bool
    /// Erases and returns an unredeemed ticket's result when it is not past its expiry at `now`, and its attempt was
    /// started by a browser or its binding hash is `starterHash`.
    func redeemSignInTicket(ticketHash: [UInt8], starterHash: [UInt8]?, at now: Date) async throws
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
    private static func completeSignIn(
        _ request: SignInCompletionRequest,
        capture item: CaptureItem?,
        in transaction: some SignInWriteTransaction,
        auditing audit: inout [AuditDraft],
        keyVersions: inout Set<UInt32>
    ) async throws -> SignInCompletion {
        guard let attempt = try await transaction.signInAttempt(stateHash: request.stateHash) else { return .unknown }
        guard attempt.isLive(at: request.receivedAt) else { return .expired(attempt) }
        guard attempt.accepts(bindingHash: request.bindingHash) else { return .bindingMismatch(attempt) }
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
        let ticket = request.ticket(outcome?.record.id)
        // The attempt is locked (or the store serializes writers): it cannot have been used since it was read.
        guard try await transaction.useSignInAttempt(attempt, at: request.now, ticket: ticket)
        else { throw EscrowStoreError(.failed, "the sign-in attempt was used during its completion; try again") }
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
