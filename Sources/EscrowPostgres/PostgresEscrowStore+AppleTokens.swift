public import EscrowCore
public import EscrowCrypto
public import Foundation
import PostgresNIO

/// Apple token exchanges in the shared database, through the store engine: whichever node captured the code, one
/// node at a time exchanges it.
extension PostgresEscrowStore: AppleTokenStore {
    public func claimAppleExchanges(at now: Date, limit: Int, lease: Double) async throws -> [AppleTokenExchange] {
        try requireWritable()
        return try await Self.engineTransaction(database, "claiming Apple token exchanges failed") {
            try await StoreEngine.claimAppleExchanges(at: now, limit: limit, lease: lease, in: $0)
        }
    }

    public func rescheduleAppleExchange(
        _ key: AppleTokenExchange.Key,
        attempts: Int,
        at next: Date
    ) async throws -> Bool {
        try requireWritable()
        return try await Self.engineTransaction(database, "rescheduling an Apple token exchange failed") {
            try await $0.setAppleExchange(key, expected: attempts, attempts: attempts, next: next)
        }
    }

    public func endAppleExchange(
        _ key: AppleTokenExchange.Key,
        attempts: Int,
        outcome: AppleTokenExchange.Outcome,
        at now: Date
    ) async throws -> Bool {
        try requireWritable()
        return try await Self.engineTransaction(database, "ending an Apple token exchange failed") {
            try await $0.endAppleExchange(key, expected: attempts, outcome: outcome, at: now)
        }
    }

    public func appleExchanges(escrowID: EscrowID) async throws -> [AppleTokenExchange] {
        try await database.rows(
            "reading Apple token exchanges failed",
            """
            SELECT \(unescaped: Self.appleExchangeColumns) FROM apple_token_exchange
            WHERE escrow_id = \(Data(escrowID.bytes)) ORDER BY created_at, code_hash
            """
        ).compactMap(Self.appleExchange)
    }

    public func escrowIDsWithAppleExchanges(among escrowIDs: [EscrowID]) async throws -> Set<EscrowID> {
        guard !escrowIDs.isEmpty else { return [] }
        let rows = try await database.rows(
            "reading Apple token exchanges failed",
            """
            SELECT DISTINCT escrow_id FROM apple_token_exchange
            WHERE escrow_id = ANY(\(escrowIDs.map { ByteBuffer(bytes: $0.bytes) }))
            """
        )
        return Set(try rows.compactMap { EscrowID(bytes: [UInt8](try $0.decode(Data.self))) })
    }

    public func runningAppleExchangeCount() async throws -> Int {
        let rows = try await database.rows(
            "counting Apple token exchanges failed",
            "SELECT COUNT(*) FROM apple_token_exchange WHERE ended_at IS NULL"
        )
        return Int(try rows.first?.decode(Int64.self) ?? 0)
    }
}
