import EscrowCore
import EscrowPostgres
import EscrowTestSupport
import Foundation
import PostgresNIO
import Testing

/// While the database refuses connections, operations fail fast with `store_unavailable` (HTTP 503), never
/// acknowledging anything; once it accepts them again, the same store works without being reopened.
@Suite("PostgreSQL: unreachable database, then back")
struct ReconnectTests {
    @Test func failsFastThenReconnectsByItself() async throws {
        try await TestDatabase.with { database in
            var configuration = PostgresEscrowStore.Configuration()
            configuration.connectionWaitTimeout = 1
            // Its connections wait at most 1 s: on a server busy with the rest of the suite, opening may need
            // another try too.
            var opened: PostgresEscrowStore?
            try await eventually("the store opens", within: 60, every: .milliseconds(500)) {
                opened = try? await database.open(configuration)
                return opened != nil
            }
            let store = try #require(opened)
            let records = Records()
            let before = try records.record(user: 1)
            // The store's first connection waits at most 1 s: on a server busy with the rest of the suite, the first
            // capture may need another try (a capture of the same content again changes nothing).
            try await eventually("the first capture", within: 60, every: .milliseconds(200)) {
                (try? await store.capture(before, actor: .library, lifecycle: EscrowLifecycle())) != nil
            }

            // No new connection is allowed, and the store's open ones are cut: as during a server restart.
            try await database.executeOnServer(
                PostgresQuery(unsafeSQL: "ALTER DATABASE \(database.name) ALLOW_CONNECTIONS false")
            )
            try await database.cutConnections()
            let during = try records.record(user: 2)
            let start = ContinuousClock.now
            var failures = 0
            for _ in 0..<3 {
                do {
                    _ = try await store.capture(during, actor: .library, lifecycle: EscrowLifecycle())
                } catch let error as EscrowStoreError {
                    #expect(error.code == .unavailable, "\(error.message)")
                    failures += 1
                }
            }
            #expect(failures >= 2, "captures fail while the database refuses connections")
            #expect(ContinuousClock.now - start < .seconds(10), "and fail fast")

            try await database.executeOnServer(
                PostgresQuery(unsafeSQL: "ALTER DATABASE \(database.name) ALLOW_CONNECTIONS true")
            )
            let recovered =
                (try? await eventually("the store to reconnect", within: 120, every: .milliseconds(500)) {
                    (try? await store.capture(during, actor: .library, lifecycle: EscrowLifecycle())) != nil
                }) != nil
            #expect(recovered, "the store reconnects by itself")
            // A read may still be handed a pooled connection that the cut closed (one per such connection): it fails
            // fast, and a later one answers. Both reads must answer, with what was stored (bounded, so a store that
            // never reads again, or reads wrong, fails here).
            try await eventually("reads answer again", within: 30, every: .milliseconds(200)) {
                guard let found = try? await store.record(id: before.id),
                    let other = try? await store.record(blindIndex: during.blindIndex)
                else { return false }
                #expect(found == before)
                #expect(other.id == during.id)
                return true
            }
            await store.close()
        }
    }
}
