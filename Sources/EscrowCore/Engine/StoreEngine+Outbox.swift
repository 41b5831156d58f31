package import Foundation

/// The statements a store runs for handled Apple notifications and their outbox, inside an
/// ``EscrowWriteTransaction``.
package protocol OutboxWriteTransaction: EscrowWriteTransaction {
    /// Records a handled notification id; false when it was recorded already.
    func insertNotification(idHash: [UInt8], at now: Date) async throws -> Bool
    /// How many entries the outbox holds.
    func outboxCount() async throws -> Int
    /// Inserts an entry unless one with its webhook id exists; returns whether it did.
    func insertOutbox(_ entry: OutboxEntry) async throws -> Bool
    /// Up to `limit` entries due at `now`, the longest due first, locked (skipping entries other transactions hold)
    /// where the store locks rows.
    func dueOutbox(at now: Date, limit: Int) async throws -> [OutboxEntry]
    /// Sets an entry's attempts and when it is next due, when its attempts are `expected` (nil: whatever they are);
    /// returns whether it did.
    func setOutbox(webhookID: String, expected: Int?, attempts: Int, next: Date) async throws -> Bool
    /// Deletes an entry; returns whether it was there.
    func deleteOutbox(webhookID: String) async throws -> Bool
    /// Deletes every entry created before `cutoff`; returns their webhook ids.
    func deleteOutbox(createdBefore cutoff: Date) async throws -> [String]
}

extension StoreEngine {
    /// Records a handled notification and queues its forwarded copies (one for each URL) in the caller's
    /// transaction: nothing is queued for a duplicate, nor when they would take the outbox past `capacity` entries.
    package static func recordNotification(
        idHash: [UInt8],
        at now: Date,
        forward: [OutboxEntry],
        capacity: Int,
        in transaction: some OutboxWriteTransaction
    ) async throws -> NotificationRecording {
        guard try await transaction.insertNotification(idHash: idHash, at: now) else { return .duplicate }
        guard !forward.isEmpty else { return .recorded }
        guard try await transaction.outboxCount() + forward.count <= capacity else { return .full }
        // An entry with this webhook id already queued (the id is the jti's hash) is the same notification.
        for entry in forward { _ = try await transaction.insertOutbox(entry) }
        return .queued
    }

    /// Claims due entries in the caller's transaction: each one's attempts counted and its lease set, so another
    /// forwarder does not take it before `now + lease` (nor a late answer of this claim touch a later one).
    package static func claimOutbox(
        at now: Date,
        limit: Int,
        lease: Double,
        in transaction: some OutboxWriteTransaction
    ) async throws -> [OutboxEntry] {
        try await claimLeased(try await transaction.dueOutbox(at: now, limit: max(0, limit)), at: now, lease: lease) {
            try await transaction.setOutbox(webhookID: $0.webhookID, expected: $0.attempts, attempts: $1, next: $2)
        }
    }
}

/// An item of a queue claimed with a lease: the notification outbox, Apple's code exchanges and revocations.
package protocol LeasedItem {
    /// Attempts so far: a claim counts one.
    var attempts: Int { get set }
    /// When it is next due; while it is claimed, the end of the claim's lease.
    var nextAttemptAt: Date { get set }
}

extension OutboxEntry: LeasedItem {}
extension AppleTokenExchange: LeasedItem {}
extension AppleRevocation: LeasedItem {}

extension StoreEngine {
    /// Claims `due` items of a leased queue: each one's attempts counted and its lease set by `set` (a compare-and-set
    /// on the attempts it was read with: the item, its new attempts, the lease's end), those another claim took
    /// meanwhile left out.
    package static func claimLeased<Item: LeasedItem>(
        _ due: [Item],
        at now: Date,
        lease: Double,
        set: (Item, Int, Date) async throws -> Bool
    ) async throws -> [Item] {
        let until = now.addingTimeInterval(max(0, lease))
        var claimed: [Item] = []
        for var item in due {
            let attempts = item.attempts + 1
            guard try await set(item, attempts, until) else { continue }
            item.attempts = attempts
            item.nextAttemptAt = until
            claimed.append(item)
        }
        return claimed
    }
}
