public import EscrowCrypto
public import EscrowSQLite
import Foundation
public import InMemoryLogging
public import Logging
public import ProfileEscrow

/// A real SQLite file, a real keyring and the facade over them, with logs captured in memory and the
/// escrow's clock in the test's hands: what most tests of the library, the worker and the HTTP routes
/// stand on.
public struct EscrowFixture: Sendable {
    public let directory = TemporaryDirectory()
    public let keyring: Keyring
    public let logs = InMemoryLogHandler()
    /// Logs everything (trace and up) into ``logs``.
    public let logger: Logger
    /// The escrow's clock: the system time, moved by the test.
    public let clock = TestClock()
    public let store: SQLiteEscrowStore
    public let escrow: Escrow

    public var databasePath: String { directory.path + "/escrow.sqlite" }

    public init(
        keyring: Keyring = Keyring.generate(),
        configuration: EscrowConfiguration = EscrowConfiguration(),
        storeConfiguration: SQLiteEscrowStore.Configuration = SQLiteEscrowStore.Configuration()
    ) throws {
        self.keyring = keyring
        var handler = logs
        handler.logLevel = .trace
        logger = Logger(label: "test") { _ in handler }
        store = try SQLiteEscrowStore(
            path: directory.path + "/escrow.sqlite",
            configuration: storeConfiguration,
            logger: logger
        )
        var configuration = configuration
        configuration.clock = clock
        escrow = Escrow(store: store, keyring: keyring, configuration: configuration, logger: logger)
    }

    /// Every byte of the database, its `-wal` and its `-shm`, with the file's path.
    public func storeFiles() -> [(name: String, bytes: [UInt8])] {
        ["", "-wal", "-shm"].compactMap { suffix in
            FileManager.default.fileExists(atPath: databasePath + suffix)
                ? (databasePath + suffix, [UInt8](ProfileEscrowCLI.contents(atPath: databasePath + suffix))) : nil
        }
    }

    /// Everything that was logged, flattened to text (messages and metadata).
    public func loggedText() -> String {
        logs.entries.map { "\($0.level) \($0.message) \($0.metadata)" }.joined(separator: "\n")
    }
}

extension Array where Element == UInt8 {
    /// Whether `needle` occurs anywhere in these bytes.
    public func contains(bytes needle: [UInt8]) -> Bool {
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
