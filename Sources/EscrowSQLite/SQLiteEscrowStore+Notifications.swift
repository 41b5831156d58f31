public import EscrowCore
public import Foundation
import GRDB

/// Handled Apple notifications and the outbox of their forwarded copies, through the store engine
/// (``StoreEngine/recordNotification(idHash:at:forward:capacity:in:)``).
extension SQLiteEscrowStore: NotificationOutbox {
    public func recordNotification(
        idHash: [UInt8],
        at now: Date,
        forward: [OutboxEntry],
        capacity: Int
    ) async throws -> NotificationRecording {
        try await write {
            try await StoreEngine.recordNotification(
                idHash: idHash,
                at: now,
                forward: forward,
                capacity: capacity,
                in: $0
            )
        }
    }

    public func hasNotification(idHash: [UInt8]) async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM apple_notification WHERE jti_hash = ?)"),
                arguments: [Data(idHash)]
            ) ?? false
        }
    }

    /// Not waiting for the disk (see `write(durable:)`): a claim lost in a power cut only makes its entries due
    /// again at once, and they are sent again (the backend dedupes on the webhook id).
    public func claimOutbox(at now: Date, limit: Int, lease: Double) async throws -> [OutboxEntry] {
        try await write(durable: false) {
            try await StoreEngine.claimOutbox(at: now, limit: limit, lease: lease, in: $0)
        }
    }

    public func rescheduleOutbox(webhookID: String, attempts: Int, at next: Date) async throws -> Bool {
        try await write(durable: false) {
            try $0.setOutbox(webhookID: webhookID, expected: attempts, attempts: attempts, next: next)
        }
    }

    public func deleteOutbox(webhookID: String) async throws -> Bool {
        try await write { try $0.deleteOutbox(webhookID: webhookID) }
    }

    public func sweepOutbox(createdBefore cutoff: Date) async throws -> [String] {
        try await write { try $0.deleteOutbox(createdBefore: cutoff) }
    }

    public func outboxCount() async throws -> Int {
        try await read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM notification_outbox") ?? 0 }
    }
}
