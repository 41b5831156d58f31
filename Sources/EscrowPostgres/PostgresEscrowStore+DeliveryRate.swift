public import EscrowCore
import PostgresNIO

extension PostgresEscrowStore {
    public func deliveryRate() async throws -> DeliveryRate {
        let rows = try await database.rows(
            "read failed",
            "SELECT per_second, next_slot_us FROM delivery_rate WHERE id = 1"
        )
        guard let row = rows.first else { return .unlimited }
        let (perSecond, nextSlot) = try decode(row, (Double?, Int64).self)
        return DeliveryRate(perSecond: perSecond, nextSlot: nextSlot)
    }

    /// One statement, no transaction around it: the row's lock orders two workers, and the second matches nothing.
    public func advanceDeliverySlot(from expected: Int64, to nextSlot: Int64, perSecond: Double?) async throws -> Bool {
        try requireWritable()
        let rows = try await database.rows(
            "taking delivery slots failed",
            """
            UPDATE delivery_rate SET next_slot_us = \(nextSlot), per_second = \(perSecond)
            WHERE id = 1 AND next_slot_us = \(expected)
            RETURNING 1
            """
        )
        return rows.count == 1
    }
}
