import EscrowCore
import EscrowCrypto
import EscrowPostgres
import Foundation
import PostgresNIO
import Testing

/// Group commit on PostgreSQL, measured beside a floor in the same run: durable captures per second of one node
/// under 256 concurrent callers, of the same node one capture at a time, and of raw postgres-nio INSERTs of the
/// same rows (autocommit, `synchronous_commit` on, the same pool size) into a copy of the escrow table. The figures
/// are printed (docs/performance.md quotes a run); the test asserts only that every row landed (no timed assertion).
@Suite("PostgreSQL: group commit throughput")
struct CaptureThroughputTests {
    @Test func concurrentCapturesShareCommits() async throws {
        try await TestDatabase.with { database in
            let store = try await database.open()
            let records = Records()
            let count = 2_000
            let concurrent = try (0..<count).map { try records.record(user: $0) }
            let serial = try (0..<200).map { try records.record(user: 100_000 + $0) }
            let floor = try (0..<count).map { try records.record(user: 200_000 + $0) }

            let clock = ContinuousClock()
            let concurrentTime = try await clock.measure {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for record in concurrent {
                        group.addTask { _ = try await store.capture(record, actor: .library, lifecycle: .init()) }
                    }
                    try await group.waitForAll()
                }
            }
            let serialTime = try await clock.measure {
                for record in serial { _ = try await store.capture(record, actor: .library, lifecycle: .init()) }
            }

            try await database.execute("CREATE TABLE escrow_floor (LIKE escrow INCLUDING ALL)")
            let client = PostgresClient(configuration: try PostgresURL(database.url).clientConfiguration())
            let floorTime = try await withThrowingTaskGroup(of: Void.self) { runner in
                runner.addTask { await client.run() }
                defer { runner.cancelAll() }
                return try await clock.measure {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for record in floor {
                            group.addTask { try await Self.insert(record, client) }
                        }
                        try await group.waitForAll()
                    }
                }
            }

            let ours = Self.rate(count, concurrentTime)
            let oneAtATime = Self.rate(serial.count, serialTime)
            let raw = Self.rate(count, floorTime)
            print(
                "PostgreSQL captures/s: group commit \(Int(ours)) (\(count) callers), one at a time \(Int(oneAtATime)), "
                    + "raw postgres-nio INSERT floor \(Int(raw)); ours/floor \(String(format: "%.2f", ours / raw))"
            )
            #expect(try await database.rows("SELECT 1 FROM escrow").count == count + serial.count)
            #expect(try await database.rows("SELECT 1 FROM escrow_floor").count == count)
            await store.close()
        }
    }

    static func rate(_ count: Int, _ duration: Duration) -> Double {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return Double(count) / seconds
    }

    /// The same row as a capture writes, alone, committed on its own.
    static func insert(_ record: EscrowRecord, _ client: PostgresClient) async throws {
        let sealed = record.sealed
        try await client.query(
            """
            INSERT INTO escrow_floor (id, blind_index, key_version, public_key, sealed_profile, sealed_key, mac,
                content_tag, state, revision, attempts, next_attempt_at, due_at, created_at, expires_at, updated_at)
            VALUES (\(Data(sealed.id.bytes)), \(Data(sealed.blindIndex.bytes)), \(Int64(sealed.keyVersion)),
                \(Data(sealed.publicKey)), \(Data(sealed.sealedProfile)), \(Data(sealed.sealedKey)),
                \(Data(sealed.mac)), \(Data(record.contentTag)), 'pending', 1, 0, 0, 0, 0, 0, 0)
            """
        )
    }
}
