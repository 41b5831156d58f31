public import EscrowCore
public import EscrowCrypto
public import Foundation
import GRDB

/// Apple token exchanges beside the escrows, through the store engine
/// (``StoreEngine/claimAppleExchanges(at:limit:lease:in:)``); queued by a sign-in's capture in its own transaction.
extension SQLiteEscrowStore: AppleTokenStore {
    /// Not waiting for the disk: a claim lost in a power cut only makes its exchanges due again at once.
    public func claimAppleExchanges(at now: Date, limit: Int, lease: Double) async throws -> [AppleTokenExchange] {
        try await write(durable: false) {
            try await StoreEngine.claimAppleExchanges(at: now, limit: limit, lease: lease, in: $0)
        }
    }

    public func rescheduleAppleExchange(
        _ key: AppleTokenExchange.Key,
        attempts: Int,
        at next: Date
    ) async throws -> Bool {
        try await write(durable: false) {
            try $0.setAppleExchange(key, expected: attempts, attempts: attempts, next: next)
        }
    }

    public func endAppleExchange(
        _ key: AppleTokenExchange.Key,
        attempts: Int,
        outcome: AppleTokenExchange.Outcome,
        at now: Date
    ) async throws -> Bool {
        try await write { try $0.endAppleExchange(key, expected: attempts, outcome: outcome, at: now) }
    }

    public func appleExchanges(escrowID: EscrowID) async throws -> [AppleTokenExchange] {
        try await read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: "SELECT \(SQLiteWriteTransaction.appleExchangeColumns) FROM apple_token_exchange "
                        + "WHERE escrow_id = ? ORDER BY created_at, code_hash"
                ),
                arguments: [Data(escrowID.bytes)]
            ).compactMap(SQLiteWriteTransaction.appleExchange)
        }
    }

    public func escrowIDsWithAppleExchanges(among escrowIDs: [EscrowID]) async throws -> Set<EscrowID> {
        guard !escrowIDs.isEmpty else { return [] }
        // One statement per batch size (a claim's batch is at most the worker's concurrency), each prepared once.
        let placeholders = Array(repeating: "?", count: escrowIDs.count).joined(separator: ",")
        return try await read { db in
            let found = try Data.fetchAll(
                db.cachedStatement(
                    sql: "SELECT DISTINCT escrow_id FROM apple_token_exchange WHERE escrow_id IN (\(placeholders))"
                ),
                arguments: StatementArguments(escrowIDs.map { Data($0.bytes) })
            )
            return Set(found.compactMap { EscrowID(bytes: [UInt8]($0)) })
        }
    }

    public func runningAppleExchangeCount() async throws -> Int {
        try await read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM apple_token_exchange WHERE ended_at IS NULL") ?? 0
        }
    }
}
