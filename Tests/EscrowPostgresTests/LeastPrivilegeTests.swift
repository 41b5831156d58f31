import EscrowCore
import EscrowCrypto
import EscrowPostgres
import Foundation
import PostgresNIO
import Testing

/// The roles of docs/operations.md: an owner role migrates; the service role, which owns nothing, runs every
/// operation and can drop nothing.
@Suite("PostgreSQL: least privilege")
struct LeastPrivilegeTests {
    @Test func serviceRoleRunsEverythingAndDropsNothing() async throws {
        try await TestDatabase.with { database in
            let suffix = database.name.dropFirst("pgtest_".count)
            let owner = "pgtest_owner_\(suffix)"
            let service = "pgtest_service_\(suffix)"
            for statement in [
                "CREATE ROLE \(owner) LOGIN", "CREATE ROLE \(service) LOGIN",
                "ALTER DATABASE \(database.name) OWNER TO \(owner)",
            ] {
                try await database.execute(PostgresQuery(unsafeSQL: statement))
            }
            for statement in [
                "REVOKE CREATE ON SCHEMA public FROM PUBLIC", "GRANT CREATE ON SCHEMA public TO \(owner)",
                "GRANT USAGE ON SCHEMA public TO \(service)",
                """
                ALTER DEFAULT PRIVILEGES FOR ROLE \(owner) IN SCHEMA public
                GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO \(service)
                """,
            ] {
                try await database.execute(PostgresQuery(unsafeSQL: statement))
            }
            let ownerURL = Self.url(database.url, user: owner)
            let serviceURL = Self.url(database.url, user: service)

            // Before the owner migrated, the service role is refused with a schema error naming the migration role.
            let early = await #expect(throws: EscrowStoreError.self) {
                try await PostgresEscrowStore.connect(url: serviceURL, logger: TestDatabase.logger)
            }
            #expect(early?.code == .schema)
            #expect(early?.message.contains("migration role") == true)

            let migrating = try await PostgresEscrowStore.connect(url: ownerURL, logger: TestDatabase.logger)
            await migrating.close()
            let store = try await PostgresEscrowStore.connect(url: serviceURL, logger: TestDatabase.logger)
            let records = Records()
            let record = try records.record(user: 1)
            _ = try await store.capture(record, actor: .library, lifecycle: EscrowLifecycle())
            let leased = try await store.claimDue(
                ClaimRequest(now: records.start, limit: 1, owner: "w1", leaseDuration: 60),
                lifecycle: EscrowLifecycle()
            )
            #expect(leased.count == 1)
            let confirm = EscrowLifecycle().handle(.confirm, on: leased[0], at: records.start, actor: .library)
            #expect(try await store.commit(confirm, id: record.id, expectedRevision: leased[0].revision))
            // Retiring takes a SHARE lock on the escrow table: the table grants allow it.
            try await store.retireKeyVersion(
                UInt32(999),
                audit: [AuditDraft(type: .keysRetired, at: records.start, detail: "999", actor: .cli)]
            )
            try await store.addToken(
                AccessTokenRecord(
                    name: "svc.pgtest",
                    scopes: [.capture],
                    hash: Hashing.blake2b256(Array("pe_fake-token-0003".utf8)),
                    createdAt: Date()
                )
            )
            #expect(try await store.recordNotification(idHash: [1, 2, 3], at: Date()))

            // The service role owns no table: it can neither drop nor alter one.
            try await TestDatabase.admin(serviceURL) { connection in
                for statement in ["DROP TABLE audit_event", "ALTER TABLE escrow ADD COLUMN x int", "TRUNCATE escrow"] {
                    await #expect(throws: PSQLError.self) {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: TestDatabase.logger)
                    }
                }
            }
            // captured, purged (a confirm call: one event), keys-retired: nothing was dropped or emptied.
            #expect(try await database.rows("SELECT 1 FROM audit_event").count == 3)
            await store.close()
            for role in [owner, service] {
                try await database.execute(PostgresQuery(unsafeSQL: "DROP OWNED BY \(role) CASCADE"))
            }
            try await database.execute(
                PostgresQuery(unsafeSQL: "ALTER DATABASE \(database.name) OWNER TO CURRENT_USER")
            )
            try await TestDatabase.admin(database.serverURL) { connection in
                for role in [owner, service] {
                    try await connection.query(
                        PostgresQuery(unsafeSQL: "DROP ROLE \(role)"),
                        logger: TestDatabase.logger
                    )
                }
            }
        }
    }

    static func url(_ base: String, user: String) -> String {
        var components = URLComponents(string: base)!
        components.user = user
        return components.string!
    }
}
