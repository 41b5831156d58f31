import EscrowCore
import EscrowCrypto
import EscrowPostgres
import Foundation
import PostgresNIO
import Testing

@Suite("PostgreSQL store: durability, malformed rows, errors")
struct PostgresStoreSafetyTests {
    @Test("a server with synchronous_commit off or local is refused at open", arguments: ["off", "local"])
    func refusesAsynchronousCommit(_ setting: String) async throws {
        try await TestDatabase.with { database in
            try await database.execute(
                PostgresQuery(unsafeSQL: "ALTER DATABASE \(database.name) SET synchronous_commit = \(setting)")
            )
            let error = await #expect(throws: EscrowStoreError.self) { try await database.open() }
            #expect(error?.code == .unavailable)
            #expect(error?.message.contains("synchronous_commit=\(setting)") == true)
        }
    }

    @Test("a row whose key version is outside 32 bits is quarantined as dead, alone")
    func malformedRowIsQuarantined() async throws {
        try await TestDatabase.with { database in
            let store = try await database.open()
            let records = Records()
            let broken = try records.record(user: 1)
            let healthy = try records.record(user: 2)
            _ = try await store.capture(broken, actor: .library, lifecycle: EscrowLifecycle())
            _ = try await store.capture(healthy, actor: .library, lifecycle: EscrowLifecycle())
            try await database.execute(
                "UPDATE escrow SET key_version = \(Int64(1) << 40) WHERE id = \(Data(broken.id.bytes))"
            )
            await #expect(throws: EscrowStoreError.self) { try await store.record(id: broken.id) }
            let request = ClaimRequest(now: records.start, limit: 10, owner: "w1", leaseDuration: 60)
            let leased = try await store.claimDue(request, lifecycle: EscrowLifecycle())
            #expect(leased.map(\.id) == [healthy.id], "the healthy escrow is still delivered")
            let state = try await database.rows(
                "SELECT state, dead_code, due_at FROM escrow WHERE id = \(Data(broken.id.bytes))"
            )
            let (text, code, due) = try state[0].decode((String, String?, Int64?).self)
            #expect(text == "dead" && code == DeadCode.ciphertextInvalid.rawValue && due == nil)
            let events = try await store.auditEvents(escrowID: broken.id.hex, limit: 10)
            #expect(events.map(\.draft.type) == [.captured, .dead])
            // A second claim leaves it alone: no second dead event.
            _ = try await store.claimDue(request, lifecycle: EscrowLifecycle())
            #expect(try await store.auditEvents(escrowID: broken.id.hex, limit: 10).count == 2)
            // A new capture of the same user replaces the broken row.
            let fresh = try records.record(user: 1, content: "new")
            #expect(try await store.capture(fresh, actor: .library, lifecycle: EscrowLifecycle()) == .created(fresh))
            await store.close()
        }
    }

    @Test("claims go past broken rows, whatever the version filter; a broken row leaves the queue; the sweep purges it")
    func brokenRowsNeverEndAClaim() async throws {
        try await TestDatabase.with { database in
            let store = try await database.open()
            let records = Records()
            let broken = try (0..<3).map {
                try records.record(user: 10 + $0, at: records.start.addingTimeInterval(-10))
            }
            let healthy = try records.record(user: 20)
            for record in broken + [healthy] {
                _ = try await store.capture(record, actor: .library, lifecycle: EscrowLifecycle())
            }
            let ids = broken.map { Data($0.id.bytes) }
            try await database.execute("UPDATE escrow SET key_version = -1 WHERE id = \(ids[0])")
            try await database.execute("UPDATE escrow SET id = '\\x00'::bytea WHERE id = \(ids[1])")
            try await database.execute("UPDATE escrow SET state = 'leased', lease_owner = NULL WHERE id = \(ids[2])")
            // The three broken rows are due first; a claim of one lease filtered on the healthy row's version still
            // gets it.
            let version = healthy.sealed.keyVersion
            let request = ClaimRequest(
                now: records.start,
                limit: 1,
                owner: "w1",
                leaseDuration: 60,
                keyVersions: [version]
            )
            let leased = try await store.claimDue(request, lifecycle: EscrowLifecycle())
            #expect(leased.map(\.id) == [healthy.id])
            let dead = try await database.rows("SELECT 1 FROM escrow WHERE state = 'dead' AND due_at IS NULL")
            #expect(dead.count == 3)
            // A quarantined row made due again is taken off the queue without a second event.
            try await database.execute("UPDATE escrow SET due_at = 0 WHERE key_version = -1")
            _ = try await store.claimDue(request, lifecycle: EscrowLifecycle())
            #expect(try await database.rows("SELECT 1 FROM escrow WHERE due_at IS NOT NULL AND state = 'dead'").isEmpty)
            #expect(try await allEvents(store).filter { $0.draft.type == .dead }.count == 3)
            // Past retention, the sweep's purge of broken rows deletes the two still broken, each with its `purged`
            // event (the quarantine made the third a well-formed dead record: the lifecycle's sweep purges it).
            let later = records.start.addingTimeInterval(7200)
            #expect(try await store.purgeMalformed(expiredAt: later, actor: .cli, lifecycle: EscrowLifecycle()) == 2)
            #expect(try await store.purgeMalformed(expiredAt: later, actor: .cli, lifecycle: EscrowLifecycle()) == 0)
            #expect(try await database.rows("SELECT 1 FROM escrow").count == 2)
            let purged = try await allEvents(store).filter { $0.draft.type == .purged }
            #expect(purged.count == 2 && purged.allSatisfy { $0.draft.detail == PurgeReason.expired.rawValue })
            await store.close()
        }
    }

    @Test("a revision at the top of bigint or a time past year 9999 is quarantined, never an overflow")
    func revisionAndTimeOutOfRange() async throws {
        try await TestDatabase.with { database in
            let store = try await database.open()
            let records = Records()
            let broken = try (0..<2).map {
                try records.record(user: 30 + $0, at: records.start.addingTimeInterval(-10))
            }
            let healthy = try records.record(user: 40)
            for record in broken + [healthy] {
                _ = try await store.capture(record, actor: .library, lifecycle: EscrowLifecycle())
            }
            let ids = broken.map { Data($0.id.bytes) }
            try await database.execute("UPDATE escrow SET revision = \(Int64.max) WHERE id = \(ids[0])")
            try await database.execute("UPDATE escrow SET created_at = \(Int64.max - 1) WHERE id = \(ids[1])")
            let request = ClaimRequest(now: records.start, limit: 3, owner: "w1", leaseDuration: 60, keyVersions: nil)
            let leased = try await store.claimDue(request, lifecycle: EscrowLifecycle())
            #expect(leased.map(\.id) == [healthy.id])
            let dead = try await database.rows(
                "SELECT revision FROM escrow WHERE state = 'dead' AND dead_code = 'ciphertext_invalid'"
            )
            #expect(dead.count == 2)
            // The quarantine's own bump cannot overflow: the top revision starts again from 0.
            let revisions = try dead.map { try $0.makeRandomAccess()[0].decode(Int64.self) }
            #expect(revisions.allSatisfy { EscrowRecord.storedRevisions.contains($0) })
            await store.close()
        }
    }

    @Test("a capture sealed to a retired key version is refused, even from a node that retired it meanwhile")
    func retiredVersionRefused() async throws {
        try await TestDatabase.with { database in
            let (a, b) = (try await database.open(), try await database.open())
            let records = Records()
            let record = try records.record(user: 1)
            let version = record.sealed.keyVersion
            let draft = AuditDraft(type: .keysRetired, at: records.start, detail: "\(version)", actor: .cli)
            try await a.retireKeyVersion(version, audit: [draft])
            try await a.retireKeyVersion(version, audit: [draft])
            #expect(try await allEvents(a).count == 1, "retiring twice appends once")
            let error = await #expect(throws: EscrowStoreError.self) {
                try await b.capture(record, actor: .library, lifecycle: EscrowLifecycle())
            }
            #expect(error?.code == .keyVersionRetired)
            #expect(try await b.record(id: record.id) == nil)
            await a.close()
            await b.close()
        }
    }

    @Test("a read-only store writes nothing")
    func readOnly() async throws {
        try await TestDatabase.with { database in
            let writer = try await database.open()
            var configuration = PostgresEscrowStore.Configuration()
            configuration.readOnly = true
            let reader = try await database.open(configuration)
            let record = try Records().record(user: 1)
            let error = await #expect(throws: EscrowStoreError.self) {
                try await reader.capture(record, actor: .library, lifecycle: EscrowLifecycle())
            }
            #expect(error?.code == .readOnly)
            _ = try await writer.capture(record, actor: .library, lifecycle: EscrowLifecycle())
            #expect(try await reader.record(id: record.id) == record)
            await writer.close()
            await reader.close()
        }
    }

    @Test("a wrong password fails with an error that does not hold it")
    func passwordNeverInErrors() async throws {
        let server = try TestDatabase.serverURL
        var components = URLComponents(string: server)!
        components.user = "pgtest_nobody"
        components.password = "fake-secret-password-0001"
        let error = await #expect(throws: EscrowStoreError.self) {
            try await PostgresEscrowStore.connect(url: components.string!, logger: TestDatabase.logger)
        }
        let text = "\(error.map { "\($0) \($0.message)" } ?? "")"
        #expect(error?.code == .unavailable)
        #expect(!text.contains("fake-secret-password-0001"))
        #expect(text.contains("pgtest_nobody"), "the error names the role: \(text)")
    }
}

@Suite("PostgreSQL URLs, as libpq reads them")
struct PostgresURLTests {
    @Test func fullURL() throws {
        let url = try PostgresURL(
            "postgresql://escrow%40svc:p%40ss%2Fw0rd@db.example.invalid:6543/escrow?sslmode=verify-full&application_name=pe",
            environment: [:]
        )
        #expect(url.user == "escrow@svc")
        #expect(url.host == "db.example.invalid")
        #expect(url.port == 6543)
        #expect(url.database == "escrow")
        #expect(url.sslMode == .verifyFull)
        #expect(url.applicationName == "pe")
        #expect(!url.description.contains("p@ss"))
        #expect(url.description == "postgresql://escrow@svc@db.example.invalid:6543/escrow?sslmode=verify-full")
        let configuration = try url.clientConfiguration()
        #expect(configuration.password == "p@ss/w0rd")
        #expect(configuration.host == "db.example.invalid")
    }

    @Test func defaults() throws {
        let url = try PostgresURL("postgres://db.example.invalid", environment: ["USER": "pgtest"])
        #expect(url.user == "pgtest")
        #expect(url.database == "pgtest")
        #expect(url.port == 5432)
        #expect(url.sslMode == .prefer)
        let socket = try PostgresURL("postgresql:///escrow?host=/run/pg&port=5433", environment: ["USER": "pgtest"])
        #expect(socket.unixSocketPath == "/run/pg/.s.PGSQL.5433")
        #expect(try PostgresURL("postgresql://[::1]:5432/e", environment: [:]).host == "::1")
        #expect(
            try PostgresURL("postgresql://u@h/e", environment: ["PGPASSWORD": "x"]).clientConfiguration().password
                == "x"
        )
    }

    @Test func severalHostsWithTargetSessionAttributes() throws {
        let url = try PostgresURL(
            "postgresql://u:fake-secret-0002@db1:5433,db2,[::1]:5434/escrow?target_session_attrs=read-write",
            environment: [:]
        )
        #expect(url.endpoints.map(\.description) == ["db1:5433", "db2:5432", "[::1]:5434"])
        #expect(url.host == "db1" && url.port == 5433)
        #expect(url.targetSessionAttributes == .readWrite)
        #expect(url.database == "escrow" && url.user == "u")
        #expect(
            url.description
                == "postgresql://u@db1:5433,db2:5432,[::1]:5434/escrow?sslmode=prefer&target_session_attrs=read-write"
        )
        let second = url.at(url.endpoints[1])
        #expect(second.host == "db2" && second.port == 5432 && second.endpoints.isEmpty)
        #expect(try second.clientConfiguration().password == "fake-secret-0002")
        for value in PostgresURL.TargetSessionAttributes.allCases {
            let parsed = try PostgresURL(
                "postgresql://h1,h2/e?target_session_attrs=\(value.rawValue)",
                environment: [:]
            )
            #expect(parsed.targetSessionAttributes == value)
        }
    }

    @Test(arguments: [
        "postgresql://u:fake-secret-0002@h1,h2/e?target_session_attrs=bogus",
        "postgresql://u:fake-secret-0002@h1,,h2/e",
        "postgresql://u:fake-secret-0002@h1,h2:99999/e",
        "postgresql://u:fake-secret-0002@h/e?sslmode=bogus",
        "postgresql://u:fake-secret-0002@h/e?sslmode=allow",
        "postgresql://u:fake-secret-0002@h/e?unknown=fake-secret-0002",
        "postgresql://u:fake-secret-0002@h:99999/e",
    ])
    func refusedWithoutEchoingThePassword(_ text: String) throws {
        let error = #expect(throws: EscrowStoreError.self) { try PostgresURL(text, environment: [:]) }
        #expect(error?.message.contains("fake-secret-0002") == false)
        #expect(error?.message.contains("invalid PostgreSQL URL") == true)
    }
}
