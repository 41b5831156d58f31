import EscrowCore
import EscrowCrypto
import EscrowStoreConformance
import EscrowTestSupport
import Foundation
import GRDB
import Logging
import Testing

@testable import EscrowSQLite

@Suite("SQLite store conformance")
struct SQLiteConformanceTests {
    @Test(arguments: StoreConformance.all)
    func conformance(_ check: StoreConformance.Check) async throws {
        let directory = TemporaryDirectory()
        try await check.run {
            let store = try SQLiteEscrowStore(path: directory.path + "/escrow.sqlite", logger: Logger(label: "test"))
            return StoreConformance.Subject(
                escrows: store,
                notifications: store,
                tokens: try SQLiteTokenStore(path: directory.path + "/tokens.sqlite", logger: Logger(label: "test")),
                signIns: store,
                damage: { id, damage in
                    let assignment =
                        switch damage {
                        case .negativeAttempts: "attempts = -5"
                        case .truncatedID: "id = x'\(StoreConformance.RowDamage.truncatedIDHex)'"
                        case .keyVersionOutOfRange: "key_version = 4294967297"
                        }
                    try await store.pool.write { db in
                        try db.execute(sql: "UPDATE escrow SET \(assignment) WHERE id = ?", arguments: [Data(id.bytes)])
                    }
                }
            )
        }
    }
}
