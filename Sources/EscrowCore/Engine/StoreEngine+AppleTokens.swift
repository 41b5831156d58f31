package import EscrowCrypto
package import Foundation

/// The statements a store runs for Apple token exchanges, inside an ``EscrowWriteTransaction``.
package protocol AppleTokenWriteTransaction: EscrowWriteTransaction {
    /// Queues an exchange unless its escrow has one for its code; returns whether it did.
    func insertAppleExchange(_ exchange: AppleTokenExchange) async throws -> Bool
    /// Up to `limit` running exchanges due at `now`, the longest due first, locked (skipping those other
    /// transactions hold) where the store locks rows.
    func dueAppleExchanges(at now: Date, limit: Int) async throws -> [AppleTokenExchange]
    /// Sets a running exchange's attempts and next due time when its attempts are `expected`; returns whether it did.
    func setAppleExchange(_ key: AppleTokenExchange.Key, expected: Int, attempts: Int, next: Date) async throws -> Bool
    /// Ends a running exchange whose attempts are `expected` (its sealed code erased) and makes its escrow due at
    /// `now` when it is pending, never attempted and due later; returns whether the exchange was ended.
    func endAppleExchange(
        _ key: AppleTokenExchange.Key,
        expected: Int,
        outcome: AppleTokenExchange.Outcome,
        at now: Date
    ) async throws -> Bool
}

extension StoreEngine {
    /// A capture and its authorization code's exchange in the caller's transaction, the exchange made for the escrow
    /// that holds the profile; the audit events added to `audit` as ``capture(_:in:auditing:)`` adds them: for a
    /// batch of captures (``captureQueueingCodes(_:in:)``) and a sign-in's completion, which write more in the same
    /// transaction.
    package static func capture(
        _ item: CaptureItem,
        queueing exchange: (EscrowID) -> AppleTokenExchange,
        in transaction: some AppleTokenWriteTransaction,
        auditing audit: inout [AuditDraft]
    ) async throws -> CaptureOutcome {
        let outcome = try await capture([item], in: transaction, auditing: &audit)[0]
        try await queue(exchange(outcome.record.id), after: outcome, in: transaction)
        return outcome
    }

    /// A group commit's batch of captures, some with their authorization code (``CaptureItem/appleExchange``), in the
    /// caller's transaction, each code's exchange queued for the escrow that holds its profile, the batch's audit
    /// events appended and its key versions checked: the captures without a code together
    /// (``capture(_:in:auditing:)``), then each one with a code and its code's entry in turn. In turn, because a capture may replace the escrow of one before it in the batch, which deletes that
    /// escrow's exchanges: an entry is only written for an escrow that holds its profile. (The batch's captures are
    /// concurrent calls: any order is one they could have come in.)
    package static func captureQueueingCodes(
        _ items: [CaptureItem],
        in transaction: some AppleTokenWriteTransaction
    ) async throws -> [CaptureOutcome] {
        var audit: [AuditDraft] = []
        let plain = items.indices.filter { items[$0].appleExchange == nil }
        var outcomes = [CaptureOutcome?](repeating: nil, count: items.count)
        let captured = try await capture(plain.map { items[$0] }, in: transaction, auditing: &audit)
        for (index, outcome) in zip(plain, captured) { outcomes[index] = outcome }
        for index in items.indices {
            guard let exchange = items[index].appleExchange else { continue }
            outcomes[index] = try await capture(items[index], queueing: exchange, in: transaction, auditing: &audit)
        }
        try await transaction.requireUsable(Set(items.map(\.record.sealed.keyVersion)))
        try await append(audit, transaction)
        return outcomes.map { $0! }
    }

    /// Queues `queued`, the exchange of a code that came with the capture that gave `outcome`, unless its escrow has
    /// one for the code.
    private static func queue(
        _ queued: AppleTokenExchange,
        after outcome: CaptureOutcome,
        in transaction: some AppleTokenWriteTransaction
    ) async throws {
        guard try await transaction.insertAppleExchange(queued) else { return }
        // The same content again kept the escrow captured before, with this new code: while that escrow still waits
        // for its first delivery, the delivery is held for this code's exchange too, as a new escrow's is, so that
        // the refresh token goes out with it instead of being purged unseen after a confirmation.
        if case .unchanged(let existing) = outcome, existing.phase == .pending, existing.attempts == 0,
            existing.nextAttemptAt < queued.expiresAt
        {
            var held = existing
            held.nextAttemptAt = queued.expiresAt
            held.revision = existing.revision + 1
            held.updatedAt = queued.createdAt
            _ = try await transaction.update([(held, existing.revision)])
        }
    }

    /// Claims due exchanges in the caller's transaction: each one's attempts counted and its lease set, so another
    /// exchanger does not take it before `now + lease` (nor a late answer of this claim end a later one).
    package static func claimAppleExchanges(
        at now: Date,
        limit: Int,
        lease: Double,
        in transaction: some AppleTokenWriteTransaction
    ) async throws -> [AppleTokenExchange] {
        let due = try await transaction.dueAppleExchanges(at: now, limit: max(0, limit))
        return try await claimLeased(due, at: now, lease: lease) {
            try await transaction.setAppleExchange($0.key, expected: $0.attempts, attempts: $1, next: $2)
        }
    }
}

/// The statements a store runs for Apple token revocations, inside an ``EscrowWriteTransaction``.
package protocol AppleRevocationWriteTransaction: EscrowWriteTransaction {
    /// Up to `limit` running revocations due at `now`, the longest due first, locked where the store locks rows.
    func dueAppleRevocations(at now: Date, limit: Int) async throws -> [AppleRevocation]
    /// Sets a running revocation's attempts and next due time when its attempts are `expected`.
    func setAppleRevocation(id: String, expected: Int, attempts: Int, next: Date) async throws -> Bool
    /// Ends a running revocation whose attempts are `expected`, erasing its sealed token.
    func endAppleRevocation(
        id: String,
        expected: Int,
        outcome: AppleRevocation.Outcome,
        at now: Date
    ) async throws -> Bool
}

extension StoreEngine {
    /// Claims due revocations in the caller's transaction, as ``claimAppleExchanges(at:limit:lease:in:)`` does.
    package static func claimAppleRevocations(
        at now: Date,
        limit: Int,
        lease: Double,
        in transaction: some AppleRevocationWriteTransaction
    ) async throws -> [AppleRevocation] {
        let due = try await transaction.dueAppleRevocations(at: now, limit: max(0, limit))
        return try await claimLeased(due, at: now, lease: lease) {
            try await transaction.setAppleRevocation(id: $0.id, expected: $0.attempts, attempts: $1, next: $2)
        }
    }

    /// Ends a revocation and chains its audit event in the caller's transaction: `apple-token-revoked`, or
    /// `apple-revocation-failed` with Apple's code; the detail names the revocation, never its token.
    package static func endAppleRevocation(
        id: String,
        attempts: Int,
        outcome: AppleRevocation.Outcome,
        at now: Date,
        actor: AuditActor,
        in transaction: some AppleRevocationWriteTransaction
    ) async throws -> Bool {
        guard try await transaction.endAppleRevocation(id: id, expected: attempts, outcome: outcome, at: now) else {
            return false
        }
        let draft =
            switch outcome {
            case .revoked: AuditDraft(type: .appleTokenRevoked, at: now, detail: "revocation \(id)", actor: actor)
            case .failed(let code):
                AuditDraft(type: .appleRevocationFailed, at: now, detail: "revocation \(id): \(code)", actor: actor)
            }
        try await append([draft], transaction)
        return true
    }
}
