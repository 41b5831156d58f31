import EscrowTestSupport
import GRDB

@testable import EscrowSQLite

extension EscrowFixture {
    /// Raw SQL on the store's file, as someone with database access but no keyring would do.
    func tamper(_ sql: String, _ arguments: StatementArguments = []) async throws {
        try await store.pool.write { db in try db.execute(sql: sql, arguments: arguments) }
    }
}
