import EscrowCore
import EscrowPostgres
import EscrowStoreConformance
import Testing

/// The checks every store passes, unchanged, against a real PostgreSQL server: a fresh database per check.
@Suite("PostgreSQL store conformance")
struct PostgresConformanceTests {
    @Test(arguments: StoreConformance.all)
    func conformance(_ check: StoreConformance.Check) async throws {
        try await TestDatabase.with { database in
            try await check.run { try await database.open() }
        }
    }
}
