package import Foundation

/// The statements a store runs for Apple token exchanges, inside an ``EscrowWriteTransaction``.
package protocol AppleTokenWriteTransaction: EscrowWriteTransaction {
    /// Queues an exchange unless one for its code exists; returns whether it did.
    func insertAppleExchange(_ exchange: AppleTokenExchange) async throws -> Bool
    /// Up to `limit` running exchanges due at `now`, the longest due first, locked (skipping those other
    /// transactions hold) where the store locks rows.
    func dueAppleExchanges(at now: Date, limit: Int) async throws -> [AppleTokenExchange]
    /// Sets a running exchange's attempts and next due time when its attempts are `expected`; returns whether it did.
    func setAppleExchange(codeHash: [UInt8], expected: Int, attempts: Int, next: Date) async throws -> Bool
    /// Ends a running exchange whose attempts are `expected` (its sealed code erased) and makes its escrow due at
    /// `now` when it is pending, never attempted and due later; returns whether the exchange was ended.
    func endAppleExchange(
        codeHash: [UInt8],
        expected: Int,
        outcome: AppleTokenExchange.Outcome,
        at now: Date
    ) async throws -> Bool
}

extension StoreEngine {
    /// Claims due exchanges in the caller's transaction: each one's attempts counted and its lease set, so another
    /// exchanger does not take it before `now + lease` (nor a late answer of this claim end a later one).
    package static func claimAppleExchanges(
        at now: Date,
        limit: Int,
        lease: Double,
        in transaction: some AppleTokenWriteTransaction
    ) async throws -> [AppleTokenExchange] {
        let until = now.addingTimeInterval(max(0, lease))
        var claimed: [AppleTokenExchange] = []
        for var exchange in try await transaction.dueAppleExchanges(at: now, limit: max(0, limit)) {
            let attempts = exchange.attempts + 1
            guard
                try await transaction.setAppleExchange(
                    codeHash: exchange.codeHash,
                    expected: exchange.attempts,
                    attempts: attempts,
                    next: until
                )
            else { continue }
            exchange.attempts = attempts
            exchange.nextAttemptAt = until
            claimed.append(exchange)
        }
        return claimed
    }
}
