import AsyncHTTPClient
import Benchmark
import EscrowCore
import EscrowCrypto
import EscrowPostgres
import Foundation
import Logging
import NIOCore
import PostgresNIO
import ProfileEscrow

// PostgreSQL, measured only when a server is given (`PROFILE_ESCROW_BENCH_POSTGRES_URL`, a database the benchmark
// may create others beside; docs/performance.md shows how to start a throwaway one). Each benchmark runs in a
// database of its own, created at setup and dropped at teardown.
//
// "(ours)" is the whole library path: validation, the per-user key pair, the two seals, the MAC, and the store's
// durable transaction with its audit event. "(floor)" is the same work with raw libsodium and raw postgres-nio: the
// same seals, then the escrow row and an audit row INSERTed in one transaction per capture (`synchronous_commit`
// on, as the store requires), from the same number of concurrent callers through a pool of the same size. A
// confirm-purge is, for the floor, the row's DELETE and an audit INSERT in one transaction.

/// How many captures or purges one iteration runs at once; metrics are per operation (scaling factor 1,000).
private let concurrency = 1_000
/// The pool size of one node (the store's default).
private let connectionsPerNode = 20

func postgresBenchmarks() {
    guard let url = ProcessInfo.processInfo.environment["PROFILE_ESCROW_BENCH_POSTGRES_URL"], !url.isEmpty else {
        return
    }
    let configuration = configuration(.kilo, iterations: 5, seconds: 30)
    // Enough users for the warm-up and measured iterations, and one spare.
    let prepared = (configuration.warmupIterations + configuration.maxIterations + 1) * concurrency

    for nodes in [1, 4] {
        let label = nodes == 1 ? "1 node" : "\(nodes) nodes"
        postgresBenchmark("PostgreSQL capture, \(concurrency) concurrent, \(label) (ours)", configuration) {
            try await PostgresNodes(base: url, nodes: nodes)
        } work: {
            try await $0.captureAll(users: $1)
        }
        postgresBenchmark("PostgreSQL capture, \(concurrency) concurrent, \(label) (floor)", configuration) {
            try await PostgresFloor(base: url, connections: nodes * connectionsPerNode)
        } work: {
            try await $0.captureAll(users: $1)
        }
    }

    postgresReplayBenchmarks(url: url)

    postgresBenchmark("PostgreSQL confirm-purge, \(concurrency) concurrent, 1 node (ours)", configuration) {
        let cluster = try await PostgresNodes(base: url, nodes: 1)
        try await cluster.captureAll(users: 0..<prepared)
        return cluster
    } work: {
        try await $0.purgeAll(users: $1)
    }
    postgresBenchmark("PostgreSQL confirm-purge, \(concurrency) concurrent, 1 node (floor)", configuration) {
        let raw = try await PostgresFloor(base: url, connections: connectionsPerNode)
        try await raw.captureAll(users: 0..<prepared)
        return raw
    } work: {
        try await $0.purgeAll(users: $1)
    }
}

/// What a PostgreSQL benchmark runs, ours or the floor: each captures and purges (confirms) the given users.
protocol PostgresWorkload: AnyObject, Sendable {
    func captureAll(users: Range<Int>) async throws
    func purgeAll(users: Range<Int>) async throws
    func close() async
}

/// One benchmark over the workload `make` builds at setup (closed at teardown): each iteration runs `work` over
/// the next `scaledIterations` users.
func postgresBenchmark<Workload: PostgresWorkload>(
    _ name: String,
    _ configuration: Benchmark.Configuration,
    make: @escaping @Sendable () async throws -> Workload,
    work: @escaping @Sendable (Workload, Range<Int>) async throws -> Void
) {
    let box = Box<Workload>()
    Benchmark(name, configuration: configuration) { benchmark in
        let base = box.counter
        box.counter += benchmark.scaledIterations.count
        try await work(box.value!, base..<box.counter)
    } setup: {
        box.value = try await make()
    } teardown: {
        await box.value?.close()
        box.value = nil
    }
}

/// A database of one benchmark's own beside the one `base` names, dropped by ``drop()``.
struct ScratchDatabase: Sendable {
    let base: String
    let name: String
    let url: String

    static func create(base: String) async throws -> ScratchDatabase {
        let name = "escrow_bench_\(UUID().uuidString.prefix(8).lowercased())"
        guard var components = URLComponents(string: base) else {
            throw BenchmarkSetupError("PROFILE_ESCROW_BENCH_POSTGRES_URL is not a URL")
        }
        components.path = "/" + name
        guard let url = components.string else { throw BenchmarkSetupError("cannot build the scratch database URL") }
        try await maintenance(base) {
            try await $0.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: Fixtures.logger)
        }
        return ScratchDatabase(base: base, name: name, url: url)
    }

    func drop() async {
        try? await Self.maintenance(base) {
            try await $0.query(
                PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"),
                logger: Fixtures.logger
            )
        }
    }

    /// One pooled connection to the base database, for CREATE and DROP DATABASE.
    private static func maintenance(
        _ base: String,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Void
    ) async throws {
        let client = PostgresClient(configuration: try PostgresURL(base).clientConfiguration())
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            try await client.withConnection { try await body($0) }
        }
    }
}

struct BenchmarkSetupError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// `nodes` stores on one database, each an `Escrow` with its own pool and group commit, as separate `serve` nodes
/// would be; captures and confirms are spread over them in turn.
final class PostgresNodes: PostgresWorkload {
    let database: ScratchDatabase
    let stores: [PostgresEscrowStore]
    let escrows: [Escrow]

    init(base: String, nodes: Int) async throws {
        database = try await ScratchDatabase.create(base: base)
        let keyring = Keyring.generate()
        var stores: [PostgresEscrowStore] = []
        for _ in 0..<nodes {
            var configuration = PostgresEscrowStore.Configuration()
            configuration.maximumConnections = connectionsPerNode
            stores.append(
                try await PostgresEscrowStore.connect(
                    url: database.url,
                    configuration: configuration,
                    logger: Fixtures.logger
                )
            )
        }
        self.stores = stores
        escrows = stores.map { Escrow(store: $0, keyring: keyring, logger: Fixtures.logger) }
    }

    func captureAll(users: Range<Int>) async throws {
        let escrows = escrows
        try await withThrowingTaskGroup(of: Void.self) { group in
            for user in users {
                group.addTask {
                    blackHole(try await escrows[user % escrows.count].capture(try Fixtures.profile(user)))
                }
            }
            try await group.waitForAll()
        }
    }

    /// Confirms each user's escrow (success, then purge).
    func purgeAll(users: Range<Int>) async throws {
        let escrows = escrows
        try await withThrowingTaskGroup(of: Void.self) { group in
            for user in users {
                group.addTask {
                    let purged = try await escrows[user % escrows.count].confirm(
                        userIdentifier: Fixtures.userIdentifier(user)
                    )
                    guard purged else { throw BenchmarkSetupError("user \(user) had no escrow to confirm") }
                }
            }
            try await group.waitForAll()
        }
    }

    func close() async {
        for store in stores { await store.close() }
        await database.drop()
    }
}

/// The floor: raw libsodium seals (``Floor/seal(user:)``) and raw postgres-nio statements into copies of the
/// store's escrow and audit tables (same columns and indexes), one durable transaction per operation.
final class PostgresFloor: PostgresWorkload {
    let database: ScratchDatabase
    let client: PostgresClient
    let runner: Task<Void, Never>
    let crypto: Floor

    init(base: String, connections: Int) async throws {
        database = try await ScratchDatabase.create(base: base)
        // The store's migrations make the tables the floor copies; then the store is closed.
        await (try await PostgresEscrowStore.connect(url: database.url, logger: Fixtures.logger)).close()
        var configuration = try PostgresURL(database.url).clientConfiguration()
        configuration.options.maximumConnections = connections
        let client = PostgresClient(configuration: configuration, backgroundLogger: Fixtures.logger)
        self.client = client
        runner = Task { await client.run() }
        crypto = Floor(path: Fixtures.temporaryDirectory() + "/crypto-only.sqlite")
        try await client.query("CREATE TABLE escrow_floor (LIKE escrow INCLUDING ALL)", logger: Fixtures.logger)
        try await client.query("CREATE TABLE audit_floor (LIKE audit_event INCLUDING ALL)", logger: Fixtures.logger)
        try await client.query("CREATE SEQUENCE audit_floor_seq", logger: Fixtures.logger)
    }

    func captureAll(users: Range<Int>) async throws {
        let client = client
        let crypto = crypto
        try await withThrowingTaskGroup(of: Void.self) { group in
            for user in users {
                group.addTask {
                    let sealed = crypto.seal(user: Fixtures.userIdentifier(user))
                    try await client.withTransaction(logger: Fixtures.logger) { connection in
                        try await connection.query(
                            """
                            INSERT INTO escrow_floor (id, blind_index, key_version, public_key, sealed_profile,
                                sealed_key, mac, content_tag, state, revision, attempts, next_attempt_at, due_at,
                                created_at, expires_at, updated_at)
                            VALUES (\(Data(sealed.id)), \(Data(sealed.blindIndex)), 1, \(Data(sealed.publicKey)),
                                \(Data(sealed.sealedProfile)), \(Data(sealed.sealedKey)), \(Data(sealed.mac)),
                                \(Data(sealed.mac)), 'pending', 1, 0, 0, 0, 0, 0, 0)
                            """,
                            logger: Fixtures.logger
                        )
                        try await Self.audit("captured", id: sealed.id, connection)
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    func purgeAll(users: Range<Int>) async throws {
        let client = client
        let crypto = crypto
        try await withThrowingTaskGroup(of: Void.self) { group in
            for user in users {
                group.addTask {
                    let index = crypto.blindIndex(Fixtures.userIdentifier(user))
                    try await client.withTransaction(logger: Fixtures.logger) { connection in
                        let rows = try await connection.query(
                            "DELETE FROM escrow_floor WHERE blind_index = \(Data(index)) RETURNING id",
                            logger: Fixtures.logger
                        ).collect()
                        guard let id = try rows.first?.decode(Data.self) else {
                            throw BenchmarkSetupError("user \(user) had no floor row to purge")
                        }
                        try await Self.audit("purged", id: [UInt8](id), connection)
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// One audit row like the store's, numbered by a sequence: without the chain's hash or its head row's lock.
    static func audit(_ type: String, id: [UInt8], _ connection: PostgresConnection) async throws {
        try await connection.query(
            """
            INSERT INTO audit_floor (seq, at, type, escrow_id, actor, hash)
            VALUES (nextval('audit_floor_seq'), 0, \(type), \(Hex.encode(id)), 'library', \(Data(id + id)))
            """,
            logger: Fixtures.logger
        )
    }

    func close() async {
        runner.cancel()
        await runner.value
        await database.drop()
    }
}

// MARK: - Replay end to end on PostgreSQL: claim, open, sign, POST, classify, purge + audit; beside a raw floor

/// The same as "Replay end to end" on SQLite (`ReplayEndToEnd.swift`), on one PostgreSQL node: `ReplayWorker.runOnce`
/// delivers `replayBatch` escrows, `replayConcurrency` in flight, to an instant backend in the process. The floor
/// reads each row with raw postgres-nio, opens it with raw libsodium, POSTs the same bytes with the same HTTP
/// client, and deletes each group of `replayConcurrency` with one audit row per escrow in one transaction.
func postgresReplayBenchmarks(url: String) {
    let backend = Box<InstantBackend>()
    let ours = Box<PostgresNodes>()
    Benchmark(
        "PostgreSQL replay end to end, \(replayBatch) escrows, \(replayConcurrency) in flight (ours)",
        configuration: configuration(iterations: 5, seconds: 60)
    ) { benchmark in
        for _ in benchmark.scaledIterations {
            benchmark.stopMeasurement()
            let node = ours.value!
            let base = ours.counter
            ours.counter += replayBatch
            try await node.captureAll(users: base..<(base + replayBatch))
            var worker = try ReplayWorker.Configuration(
                backendURL: backend.value!.url,
                webhookSecret: WebhookSecret.generateText()
            )
            worker.concurrency = replayConcurrency
            let replay = try ReplayWorker(escrow: node.escrows[0], configuration: worker, logger: Fixtures.logger)
            benchmark.startMeasurement()
            let summary = try await replay.runOnce()
            benchmark.stopMeasurement()
            precondition(summary.confirmed == replayBatch, "\(summary)")
        }
    } setup: {
        backend.value = try await InstantBackend.start()
        ours.value = try await PostgresNodes(base: url, nodes: 1)
    } teardown: {
        try await backend.value?.stop()
        await ours.value?.close()
        ours.value = nil
    }

    let floorBackend = Box<InstantBackend>()
    let floor = Box<PostgresFloor>()
    Benchmark(
        "PostgreSQL replay end to end, \(replayBatch) escrows, \(replayConcurrency) in flight (floor)",
        configuration: configuration(iterations: 5, seconds: 60)
    ) { benchmark in
        for _ in benchmark.scaledIterations {
            benchmark.stopMeasurement()
            let raw = floor.value!
            let base = floor.counter
            floor.counter += replayBatch
            try await raw.captureAll(users: base..<(base + replayBatch))
            let http = HTTPClient(eventLoopGroupProvider: .singleton)
            let target = floorBackend.value!.url
            benchmark.startMeasurement()
            for start in stride(from: base, to: base + replayBatch, by: replayConcurrency) {
                let users = Array(start..<min(start + replayConcurrency, base + replayBatch))
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for user in users {
                        group.addTask {
                            let row = try await raw.load(user: user)
                            precondition(raw.crypto.open(row))
                            try await InstantBackend.post(raw.crypto.plaintext, to: target, with: http)
                        }
                    }
                    try await group.waitForAll()
                }
                try await raw.purge(users: users)
            }
            benchmark.stopMeasurement()
            try await http.shutdown()
        }
    } setup: {
        floorBackend.value = try await InstantBackend.start()
        floor.value = try await PostgresFloor(base: url, connections: connectionsPerNode)
    } teardown: {
        try await floorBackend.value?.stop()
        await floor.value?.close()
        floor.value = nil
    }
}

extension PostgresFloor {
    /// The user's row, as the floor's crypto opens it.
    func load(user: Int) async throws -> Floor.Sealed {
        let index = crypto.blindIndex(Fixtures.userIdentifier(user))
        let rows = try await client.query(
            """
            SELECT id, public_key, sealed_profile, sealed_key, mac FROM escrow_floor
            WHERE blind_index = \(Data(index))
            """,
            logger: Fixtures.logger
        ).collect()
        guard let row = rows.first else { throw BenchmarkSetupError("user \(user) has no floor row") }
        let (id, publicKey, sealedProfile, sealedKey, mac) = try row.decode((Data, Data, Data, Data, Data).self)
        return Floor.Sealed(
            id: [UInt8](id),
            blindIndex: index,
            publicKey: [UInt8](publicKey),
            sealedProfile: [UInt8](sealedProfile),
            sealedKey: [UInt8](sealedKey),
            mac: [UInt8](mac)
        )
    }

    /// Deletes the users' rows with one audit row each, in one transaction.
    func purge(users: [Int]) async throws {
        let indexes = users.map { ByteBuffer(bytes: crypto.blindIndex(Fixtures.userIdentifier($0))) }
        try await client.withTransaction(logger: Fixtures.logger) { connection in
            let rows = try await connection.query(
                "DELETE FROM escrow_floor WHERE blind_index = ANY(\(indexes)) RETURNING id",
                logger: Fixtures.logger
            ).collect()
            for row in rows {
                try await Self.audit("purged", id: [UInt8](try row.decode(Data.self)), connection)
            }
        }
    }
}
