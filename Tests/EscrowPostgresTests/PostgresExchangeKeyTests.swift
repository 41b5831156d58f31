import EscrowCore
import EscrowPostgres
import EscrowTestSupport
import Foundation
import PostgresNIO
import Testing

/// Apple token exchanges in PostgreSQL since migration 14: keyed by their escrow and code.
@Suite("PostgreSQL: an exchange keyed by its escrow and code")
struct PostgresExchangeKeyTests {
    @Test("the key is (escrow_id, code_hash), which serves the escrow's lookups; the due index is the only other")
    func exchangeKey() async throws {
        try await TestDatabase.with { database in
            let store = try await database.open()
            let indexes = try await database.rows(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'apple_token_exchange' ORDER BY indexname"
            ).map { try $0.decode((String, String).self) }
            #expect(indexes.map(\.0) == ["apple_token_exchange_due", "apple_token_exchange_pkey"], "\(indexes)")
            #expect(
                indexes.last?.1.contains("UNIQUE INDEX apple_token_exchange_pkey") == true
                    && indexes.last?.1.hasSuffix("(escrow_id, code_hash)") == true,
                "\(indexes)"
            )
            await store.close()
        }
    }
}
