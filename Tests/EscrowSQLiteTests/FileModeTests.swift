import EscrowCore
import EscrowSQLite
import EscrowTestSupport
import Foundation
import Logging
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Store files")
struct FileModeTests {
    @Test("the database, -wal, -shm and write lock are owner-only even with a permissive umask")
    func ownerOnly() throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/store/escrow.sqlite"
        // A process embedding the library without the CLI's `umask 077` (022 is the usual default).
        let previous = umask(0o022)
        defer { umask(previous) }
        let store = try SQLiteEscrowStore(path: path, logger: Logger(label: "test"))
        defer { try? store.close() }
        for suffix in ["", "-wal", "-shm", ".write-lock"] {
            var info = stat()
            try #require(stat(path + suffix, &info) == 0, "\(suffix) exists")
            #expect(info.st_mode & 0o777 == 0o600, "\(suffix): \(String(info.st_mode & 0o777, radix: 8))")
        }
    }
}
