import EscrowCore
import EscrowSQLite
import EscrowStoreConformance
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

/// A directory removed when the value is released.
final class TemporaryDirectory: Sendable {
    let path: String

    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("pe-test-\(UUID().uuidString)").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}
