public import EscrowCore
public import Foundation
import PostgresNIO

extension PostgresEscrowStore {
    public func deliveryControl() async throws -> DeliveryControl {
        let rows = try await database.rows(
            "read failed",
            "SELECT paused, changed_at, changed_by, reason FROM delivery_control WHERE id = 1"
        )
        guard let row = rows.first else { return .running }
        let (paused, changedAt, changedBy, reason) = try decode(row, (Bool, Int64?, String?, String?).self)
        return DeliveryControl(
            paused: paused,
            changedAt: Self.date(changedAt),
            changedBy: changedBy.map(AuditActor.init(rawValue:)),
            reason: reason
        )
    }

    public func setDeliveriesPaused(_ paused: Bool, audit: AuditDraft) async throws -> Bool {
        try requireWritable()
        return try await Self.engineTransaction(database, "changing the delivery switch failed") { transaction in
            // The row's lock orders two nodes changing it at once: the second sees the first's state and changes
            // nothing.
            let changed = try await transaction.connection.query(
                """
                UPDATE delivery_control
                SET paused = \(paused), changed_at = \(Self.ms(audit.at)), changed_by = \(audit.actor.rawValue),
                    reason = \(audit.reason)
                WHERE id = 1 AND paused <> \(paused)
                RETURNING 1
                """,
                logger: transaction.logger
            ).collect()
            guard changed.count == 1 else { return false }
            try await StoreEngine.append([audit], transaction)
            return true
        }
    }

    public func escrowCount(expiringBefore date: Date) async throws -> Int {
        let rows = try await database.rows(
            "read failed",
            "SELECT COUNT(*) FROM escrow WHERE expires_at < \(Self.ms(date))"
        )
        return Int(try rows.first.map { try decode($0, Int64.self) } ?? 0)
    }
}
