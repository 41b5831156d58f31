import EscrowCore
import EscrowSQLite
import EscrowStoreConformance
import EscrowTestSupport
import Foundation
import Logging
import Testing

@Suite("SQLite store conformance")
struct SQLiteConformanceTests {
    @Test(arguments: StoreConformance.all)
    func conformance(_ check: StoreConformance.Check) async throws {
        let directory = TemporaryDirectory()
        try await check.run {
            try SQLiteEscrowStore(path: directory.path + "/escrow.sqlite", logger: Logger(label: "test"))
        }
    }
}
