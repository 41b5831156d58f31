import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import GRDB
import InMemoryLogging
import Logging
import ProfileEscrow

@testable import EscrowSQLite

/// A real SQLite file, a real keyring and the facade over them, with logs captured in memory.
struct Harness {
    let directory = TemporaryDirectory()
    let keyring: Keyring
    let logs = InMemoryLogHandler()
    /// The escrow's clock: the system time, moved by the test.
    let clock = TestClock()
    let store: SQLiteEscrowStore
    let escrow: Escrow

    var databasePath: String { directory.path + "/escrow.sqlite" }

    init(keyring: Keyring = Keyring.generate(), configuration: EscrowConfiguration = EscrowConfiguration()) throws {
        self.keyring = keyring
        var handler = logs
        handler.logLevel = .trace
        let logger = Logger(label: "test") { _ in handler }
        store = try SQLiteEscrowStore(path: directory.path + "/escrow.sqlite", logger: logger)
        var configuration = configuration
        configuration.clock = clock
        escrow = Escrow(store: store, keyring: keyring, configuration: configuration, logger: logger)
    }

    /// Raw SQL on the store's file, as someone with database access but no keyring would do.
    func tamper(_ sql: String, _ arguments: StatementArguments = []) async throws {
        try await store.pool.write { db in try db.execute(sql: sql, arguments: arguments) }
    }

    /// Every byte of the database, its `-wal` and its `-shm`.
    func storeFiles() -> [(name: String, bytes: [UInt8])] {
        ["", "-wal", "-shm"].compactMap { suffix in
            FileManager.default.fileExists(atPath: databasePath + suffix)
                ? (databasePath + suffix, [UInt8](ProfileEscrowCLI.contents(atPath: databasePath + suffix))) : nil
        }
    }

    /// Everything that was logged, flattened to text (messages and metadata).
    func loggedText() -> String {
        logs.entries.map { "\($0.level) \($0.message) \($0.metadata)" }.joined(separator: "\n")
    }
}

extension Array where Element == UInt8 {
    /// Whether `needle` occurs anywhere in these bytes.
    func contains(bytes needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return false }
        let first = needle[0]
        var index = 0
        let last = count - needle.count
        return withUnsafeBufferPointer { haystack in
            while index <= last {
                if haystack[index] == first, Array(haystack[index..<index + needle.count]) == needle { return true }
                index += 1
            }
            return false
        }
    }
}

/// Obviously fake profiles whose every personal field carries a scannable canary token.
enum Fake {
    static func userIdentifier(_ number: Int) -> String {
        "000000.canaryuid\(String(format: "%023d", number)).0001"
    }

    static func profile(_ number: Int, email: String? = nil) throws -> Profile {
        try Profile(
            userIdentifier: userIdentifier(number),
            fullName: PersonName(givenName: "CANARYGIVEN\(number)", familyName: "CANARYFAMILY\(number)"),
            email: email ?? "canarymail\(number)@example.invalid",
            realUserStatus: .likelyReal
        )
    }

    static let tokens = ["CANARYGIVEN", "CANARYFAMILY", "canarymail", "canaryuid"]
}
