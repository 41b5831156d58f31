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
                damage: { id, damage in try await Self.damage(store, id, damage) }
            )
        }
    }

    /// A store that offers only the escrows: a check of another capability fails, naming the list to leave out,
    /// rather than passing over a capability it never saw.
    @Test(arguments: [StoreConformance.signInChecks, StoreConformance.notificationChecks, StoreConformance.tokenChecks])
    func aCheckOfACapabilityTheSubjectLacksFails(_ checks: [StoreConformance.Check]) async throws {
        let directory = TemporaryDirectory()
        let store = try SQLiteEscrowStore(path: directory.path + "/escrow.sqlite", logger: Logger(label: "test"))
        let check = try #require(checks.first)
        await #expect {
            try await check.run { StoreConformance.Subject(escrows: store, damage: { _, _ in }) }
        } throws: { error in
            (error as? ConformanceFailure)?.description.contains("leave StoreConformance.") == true
        }
    }

    /// Damages escrow `id`'s row as the conformance suite asks, in SQLite's SQL.
    static func damage(_ store: SQLiteEscrowStore, _ id: EscrowID, _ damage: StoreConformance.RowDamage) async throws {
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
}
