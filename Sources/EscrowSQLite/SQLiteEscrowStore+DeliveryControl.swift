public import EscrowCore
public import Foundation
import GRDB

extension SQLiteEscrowStore {
    public func deliveryControl() async throws -> DeliveryControl {
        try await read { db in
            guard
                let row = try Row.fetchOne(
                    db.cachedStatement(
                        sql: "SELECT paused, changed_at, changed_by, reason FROM delivery_control WHERE id = 1"
                    )
                )
            else { return .running }
            return DeliveryControl(
                paused: row["paused"] as Int64 != 0,
                changedAt: (row["changed_at"] as Int64?).map { Timestamp.date(unixMilliseconds: $0) },
                changedBy: (row["changed_by"] as String?).map(AuditActor.init(rawValue:)),
                reason: row["reason"]
            )
        }
    }

    public func setDeliveriesPaused(_ paused: Bool, audit: AuditDraft) async throws -> Bool {
        try await write { transaction in
            let db = transaction.db
            // The write lock serializes every writer of the file: the compare and the set are one step.
            try db.execute(
                sql: """
                    UPDATE delivery_control SET paused = ?, changed_at = ?, changed_by = ?, reason = ?
                    WHERE id = 1 AND paused != ?
                    """,
                arguments: [
                    paused, Timestamp.unixMilliseconds(audit.at), audit.actor.rawValue, audit.reason, paused,
                ]
            )
            guard db.changesCount == 1 else { return false }
            try await StoreEngine.append([audit], transaction)
            return true
        }
    }

    public func escrowCount(expiringBefore date: Date) async throws -> Int {
        try await read { db in
            try Int.fetchOne(
                db.cachedStatement(sql: "SELECT COUNT(*) FROM escrow WHERE expires_at < ?"),
                arguments: [Timestamp.unixMilliseconds(date)]
            ) ?? 0
        }
    }
}
