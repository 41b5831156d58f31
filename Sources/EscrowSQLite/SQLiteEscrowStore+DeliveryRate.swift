public import EscrowCore
import GRDB

extension SQLiteEscrowStore {
    public func deliveryRate() async throws -> DeliveryRate {
        try await read { db in
            guard
                let row = try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT per_second, next_slot_us FROM delivery_rate WHERE id = 1")
                )
            else { return .unlimited }
            return DeliveryRate(perSecond: row["per_second"], nextSlot: row["next_slot_us"])
        }
    }

    /// Not waiting for the disk (see `write(durable:)`): slots lost in a power cut were only a schedule.
    public func advanceDeliverySlot(from expected: Int64, to nextSlot: Int64, perSecond: Double?) async throws -> Bool {
        try await write(durable: false) { transaction in
            try transaction.db.execute(
                sql: "UPDATE delivery_rate SET next_slot_us = ?, per_second = ? WHERE id = 1 AND next_slot_us = ?",
                arguments: [nextSlot, perSecond, expected]
            )
            return transaction.db.changesCount == 1
        }
    }
}
