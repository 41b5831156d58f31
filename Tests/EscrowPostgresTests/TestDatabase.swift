import EscrowCore
import EscrowCrypto
import EscrowPostgres
import Foundation
import Logging
import PostgresNIO

/// A fresh database on the test server for one test, dropped afterwards.
///
/// The server comes from `PROFILE_ESCROW_TEST_POSTGRES_URL`, which `scripts/test.sh` sets after starting one in a
/// temporary folder (`scripts/postgres.sh`). Without it every PostgreSQL test fails: these tests are never skipped.
struct TestDatabase: Sendable {
    struct MissingServer: Error, CustomStringConvertible {
        var description: String {
            "PROFILE_ESCROW_TEST_POSTGRES_URL is not set: run the tests with scripts/test.sh, which starts a "
                + "PostgreSQL server for them (or start one with `eval \"$(scripts/postgres.sh start)\"`)"
        }
    }

    let name: String
    let url: String
    let serverURL: String

    static var serverURL: String {
        get throws {
            guard let url = ProcessInfo.processInfo.environment["PROFILE_ESCROW_TEST_POSTGRES_URL"], !url.isEmpty else {
                throw MissingServer()
            }
            return url
        }
    }

    /// Creates a database, runs `body` with it, drops it.
    static func with<T: Sendable>(_ body: (TestDatabase) async throws -> T) async throws -> T {
        let server = try serverURL
        let name = "pgtest_" + Hex.encode(EscrowID.random().bytes.prefix(8))
        try await admin(server) { connection in
            try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
        }
        let database = TestDatabase(name: name, url: replacingDatabase(in: server, with: name), serverURL: server)
        do {
            let result = try await body(database)
            try await database.drop()
            return result
        } catch {
            try? await database.drop()
            throw error
        }
    }

    func drop() async throws {
        try await Self.admin(serverURL) { connection in
            try await connection.query(
                PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"),
                logger: Self.logger
            )
        }
    }

    /// Runs SQL on this database as the test server's superuser (to break rows, change settings).
    func execute(_ query: PostgresQuery) async throws {
        try await Self.admin(url) { connection in try await connection.query(query, logger: Self.logger) }
    }

    /// Runs SQL through the server's default database (to change this database's settings while it refuses
    /// connections).
    func executeOnServer(_ query: PostgresQuery) async throws {
        try await Self.admin(serverURL) { connection in try await connection.query(query, logger: Self.logger) }
    }

    /// Ends every session on this database but the caller's (`pg_terminate_backend`).
    func cutConnections() async throws {
        try await Self.admin(serverURL) { connection in
            try await connection.query(
                """
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                WHERE datname = \(name) AND pid <> pg_backend_pid()
                """,
                logger: Self.logger
            )
        }
    }

    func rows(_ query: PostgresQuery) async throws -> [PostgresRow] {
        try await Self.admin(url) { connection in try await connection.query(query, logger: Self.logger).collect() }
    }

    /// A store on this database. The tests run many nodes' worth of concurrent transactions beside the rest of the
    /// suite on 2 cores: an operation may queue for a pooled connection longer than the 5 s a service allows
    /// before answering 503, so the tests allow a minute.
    func open(_ configuration: PostgresEscrowStore.Configuration? = nil) async throws -> PostgresEscrowStore {
        var configuration = configuration ?? PostgresEscrowStore.Configuration()
        if configuration.connectionWaitTimeout == PostgresEscrowStore.Configuration().connectionWaitTimeout {
            configuration.connectionWaitTimeout = 60
        }
        if configuration.operationTimeout == PostgresEscrowStore.Configuration().operationTimeout {
            configuration.operationTimeout = 60
        }
        return try await PostgresEscrowStore.connect(url: url, configuration: configuration, logger: Self.logger)
    }

    static let logger = Logger(label: "escrow-postgres-tests")

    @discardableResult
    static func admin<T: Sendable>(_ url: String, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        let client = PostgresClient(configuration: try PostgresURL(url).clientConfiguration())
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            return try await client.withConnection { try await body($0) }
        }
    }

    static func replacingDatabase(in url: String, with name: String) -> String {
        var components = URLComponents(string: url)!
        components.path = "/" + name
        return components.string!
    }
}

/// Sealed records with a real keyring, for obviously fake users (`000000.pgtest…`).
struct Records: Sendable {
    let keyring = Keyring.generate()
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    func user(_ number: Int) -> String {
        "000000.pgtest\(String(format: "%020d", number)).0001"
    }

    func record(user number: Int, content: String = "content", at date: Date? = nil) throws -> EscrowRecord {
        let now = date ?? start
        let index = keyring.blindIndex(userIdentifier: user(number))
        let plaintext = SecretBytes(copying: Array("fake-profile:\(content)".utf8))
        let sealed = try keyring.seal(plaintext: plaintext, id: .random(), blindIndex: index)
        return EscrowRecord(
            sealed: sealed,
            contentTag: keyring.contentTag(blindIndex: index, plaintext: plaintext),
            createdAt: now,
            expiresAt: now.addingTimeInterval(3600)
        )
    }
}

/// Every audit event, page by page.
func allEvents(_ store: any EscrowStore) async throws -> [AuditEvent] {
    var events: [AuditEvent] = []
    while true {
        let page = try await store.auditEvents(after: events.last?.sequence ?? 0, limit: 500)
        if page.isEmpty { return events }
        events += page
    }
}
