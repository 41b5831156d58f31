import EscrowCore
import EscrowCrypto
import EscrowPostgres
import EscrowStoreConformance
import Foundation
import PostgresNIO
import Testing

/// The checks every store passes, unchanged, against a real PostgreSQL server: a fresh database per check.
@Suite("PostgreSQL store conformance")
struct PostgresConformanceTests {
    @Test(arguments: StoreConformance.all)
    func conformance(_ check: StoreConformance.Check) async throws {
        try await TestDatabase.with { database in
            try await check.run {
                let store = try await database.open()
                return StoreConformance.Subject(
                    escrows: store,
                    notifications: store,
                    tokens: store,
                    signIns: store,
                    damage: { id, damage in
                        let assignment =
                            switch damage {
                            case .negativeAttempts: "attempts = -5"
                            case .truncatedID: "id = '\\x\(StoreConformance.RowDamage.truncatedIDHex)'::bytea"
                            case .keyVersionOutOfRange: "key_version = 4294967297"
                            }
                        var binds = PostgresBindings()
                        try binds.append(Data(id.bytes))
                        try await database.execute(
                            PostgresQuery(unsafeSQL: "UPDATE escrow SET \(assignment) WHERE id = $1", binds: binds)
                        )
                    }
                )
            }
        }
    }
}
