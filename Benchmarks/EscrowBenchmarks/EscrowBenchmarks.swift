import Benchmark
import CSodium
import EscrowCore
import EscrowCrypto
import EscrowSQLite
import Foundation
import GRDBSQLite
import ProfileEscrow
import Synchronization

// Every operation is measured twice in the same run: "(ours)" through ProfileEscrow, "(floor)" the same
// work with raw libsodium and raw SQLite calls. docs/performance.md has the table and how to run it.

let metrics: [BenchmarkMetric] = [.wallClock, .throughput, .cpuTotal, .mallocCountTotal, .peakMemoryResident]

func configuration(
    _ scaling: BenchmarkScalingFactor = .one,
    iterations: Int = 2_000,
    seconds: Int = 5
) -> Benchmark.Configuration {
    .init(
        metrics: metrics,
        warmupIterations: 3,
        scalingFactor: scaling,
        maxDuration: .seconds(seconds),
        maxIterations: iterations
    )
}

let benchmarks: @Sendable () -> Void = {
    captureBenchmarks()
    ceilingBenchmarks()
    replayBenchmarks()
    replayEndToEndBenchmarks()
    purgeBenchmarks()
    reportBenchmarks()
    scaleBenchmarks()
    componentBenchmarks()
    postgresBenchmarks()
    custodyBenchmarks()
}

// MARK: - Capture: validate, keypair, two seals, MAC, durable insert, audit event

func captureBenchmarks() {
    let ours = Box<Escrow>()
    Benchmark("Capture, one at a time (ours)", configuration: configuration()) { benchmark in
        for _ in benchmark.scaledIterations {
            ours.counter += 1
            blackHole(try await ours.value!.capture(try Fixtures.profile(ours.counter)))
        }
    } setup: {
        ours.value = try Fixtures.escrow(path: Fixtures.temporaryDirectory() + "/escrow.sqlite")
    } teardown: {
        ours.value = nil
    }

    let floor = Box<Floor>()
    Benchmark("Capture, one at a time (floor)", configuration: configuration()) { benchmark in
        for _ in benchmark.scaledIterations {
            floor.counter += 1
            floor.value!.insert([floor.value!.seal(user: Fixtures.userIdentifier(floor.counter))])
        }
    } setup: {
        floor.value = Floor(path: Fixtures.temporaryDirectory() + "/floor.sqlite")
    } teardown: {
        floor.value = nil
    }

    // 1,000 concurrent captures per iteration; metrics are per capture (scaling factor 1,000).
    let concurrent = Box<Escrow>()
    Benchmark("Capture, 1000 concurrent (ours)", configuration: configuration(.kilo, iterations: 20, seconds: 10)) {
        benchmark in
        let escrow = concurrent.value!
        let base = concurrent.counter
        concurrent.counter += benchmark.scaledIterations.count
        await withThrowingTaskGroup(of: Void.self) { group in
            for number in benchmark.scaledIterations {
                group.addTask(executorPreference: WorkerExecutor.shared) {
                    blackHole(try await escrow.capture(try Fixtures.profile(base + number)))
                }
            }
            try? await group.waitForAll()
        }
    } setup: {
        concurrent.value = try Fixtures.escrow(path: Fixtures.temporaryDirectory() + "/escrow.sqlite")
    } teardown: {
        concurrent.value = nil
    }

    let concurrentFloor = Box<Floor>()
    Benchmark("Capture, 1000 concurrent (floor)", configuration: configuration(.kilo, iterations: 20, seconds: 10)) {
        benchmark in
        let floor = concurrentFloor.value!
        let base = concurrentFloor.counter
        let count = benchmark.scaledIterations.count
        concurrentFloor.counter += count
        // Seal on every core, then insert in commits of 256 (the same group size as ours).
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let sealed = Mutex<[Floor.Sealed]>([])
        DispatchQueue.concurrentPerform(iterations: cores) { core in
            var mine: [Floor.Sealed] = []
            for index in stride(from: core, to: count, by: cores) {
                mine.append(floor.seal(user: Fixtures.userIdentifier(base + index)))
            }
            sealed.withLock { $0 += mine }
        }
        let rows = sealed.withLock { $0 }
        for start in stride(from: 0, to: rows.count, by: 256) {
            floor.insert(Array(rows[start..<min(start + 256, rows.count)]))
        }
    } setup: {
        concurrentFloor.value = Floor(path: Fixtures.temporaryDirectory() + "/floor.sqlite")
    } teardown: {
        concurrentFloor.value = nil
    }
}

// MARK: - The crypto ceiling: what the issue's throughput target is a share of

func ceilingBenchmarks() {
    // Key pair + two sealed boxes on every core, 1,000 per iteration, and nothing else: no capture can be faster.
    let ceiling = Box<Floor>()
    Benchmark(
        "Capture, crypto ceiling (keypair + 2 seals, all cores)",
        configuration: configuration(.kilo, iterations: 20)
    ) { benchmark in
        let floor = ceiling.value!
        let count = benchmark.scaledIterations.count
        let cores = ProcessInfo.processInfo.activeProcessorCount
        DispatchQueue.concurrentPerform(iterations: cores) { core in
            for _ in stride(from: core, to: count, by: cores) { blackHole(floor.keypairAndTwoSeals()) }
        }
    } setup: {
        ceiling.value = Floor(path: Fixtures.temporaryDirectory() + "/ceiling.sqlite")
    } teardown: {
        ceiling.value = nil
    }
}

// MARK: - Replay-open: read the row, MAC, two opens (and, for ours, decode + validation)

func replayBenchmarks() {
    let held = 2_000
    let ours = Box<Escrow>()
    Benchmark("Replay-open (ours)", configuration: configuration()) { benchmark in
        for _ in benchmark.scaledIterations {
            ours.counter += 1
            blackHole(try await ours.value!.replay(userIdentifier: Fixtures.userIdentifier(ours.counter % held)))
        }
    } setup: {
        let escrow = try Fixtures.escrow(path: Fixtures.temporaryDirectory() + "/escrow.sqlite")
        for number in 0..<held { _ = try await escrow.capture(try Fixtures.profile(number)) }
        ours.value = escrow
    } teardown: {
        ours.value = nil
    }

    let floor = Box<Floor>()
    Benchmark("Replay-open (floor)", configuration: configuration()) { benchmark in
        for _ in benchmark.scaledIterations {
            floor.counter += 1
            let row = floor.value!.load(user: Fixtures.userIdentifier(floor.counter % held))!
            precondition(floor.value!.open(row))
        }
    } setup: {
        let value = Floor(path: Fixtures.temporaryDirectory() + "/floor.sqlite")
        value.insert((0..<held).map { value.seal(user: Fixtures.userIdentifier($0)) })
        floor.value = value
    } teardown: {
        floor.value = nil
    }
}

// MARK: - Confirm-purge: delete, audit, and the checkpoint policy

func purgeBenchmarks() {
    let held = 3_000
    for batched in [false, true] {
        let policy = batched ? "checkpoint every 100" : "checkpoint each"
        let ours = Box<Escrow>()
        Benchmark("Confirm-purge, \(policy) (ours)", configuration: configuration(iterations: held)) { benchmark in
            for _ in benchmark.scaledIterations {
                ours.counter += 1
                blackHole(try await ours.value!.confirm(userIdentifier: Fixtures.userIdentifier(ours.counter)))
                if batched, ours.counter % 100 == 0 { try await ours.value!.store.flushPurged() }
            }
        } setup: {
            let escrow = try Fixtures.escrow(
                path: Fixtures.temporaryDirectory() + "/escrow.sqlite",
                checkpointAfterPurge: !batched
            )
            for number in 1...(held + 10) { _ = try await escrow.capture(try Fixtures.profile(number)) }
            ours.value = escrow
        } teardown: {
            ours.value = nil
        }

        let floor = Box<Floor>()
        Benchmark("Confirm-purge, \(policy) (floor)", configuration: configuration(iterations: held)) { benchmark in
            for _ in benchmark.scaledIterations {
                floor.counter += 1
                floor.value!.purge(
                    user: Fixtures.userIdentifier(floor.counter),
                    checkpoint: !batched || floor.counter % 100 == 0
                )
            }
        } setup: {
            let value = Floor(path: Fixtures.temporaryDirectory() + "/floor.sqlite")
            value.insert((1...(held + 10)).map { value.seal(user: Fixtures.userIdentifier($0)) })
            floor.value = value
        } teardown: {
            floor.value = nil
        }
    }
}

// MARK: - Purge report over 100,000 and 1,000,000 audit events

func reportBenchmarks() {
    for events in [100_000, 1_000_000] {
        let label = events == 100_000 ? "100k" : "1M"
        for verify in [false, true] {
            let store = Box<SQLiteEscrowStore>()
            let name = "Purge report\(verify ? " --verify" : ""), \(label) events"
            Benchmark("\(name) (ours)", configuration: configuration(iterations: 5, seconds: 30)) { benchmark in
                for _ in benchmark.scaledIterations {
                    blackHole(try await PurgeReport.build(store: store.value!, verify: verify))
                }
            } setup: {
                var readOnly = SQLiteEscrowStore.Configuration()
                readOnly.readOnly = true
                store.value = try SQLiteEscrowStore(
                    path: try Fixtures.auditDatabase(events: events),
                    configuration: readOnly,
                    logger: Fixtures.logger
                )
            } teardown: {
                store.value = nil
            }

            let path = Box<String>()
            Benchmark("\(name) (floor)", configuration: configuration(iterations: 5, seconds: 30)) { benchmark in
                for _ in benchmark.scaledIterations { blackHole(floorReport(path: path.value!, verify: verify)) }
            } setup: {
                path.value = try Fixtures.auditDatabase(events: events)
            }
        }
    }
}

/// Raw SQLite scan of the audit table: count by type, and for --verify one BLAKE2b per row.
func floorReport(path: String, verify: Bool) -> Int {
    var db: OpaquePointer?
    sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil)
    defer { sqlite3_close(db) }
    var statement: OpaquePointer?
    sqlite3_prepare_v2(
        db,
        "SELECT seq, at, type, escrow_id, age_ms, hash FROM audit_event ORDER BY seq",
        -1,
        &statement,
        nil
    )
    defer { sqlite3_finalize(statement) }
    var purged = 0
    var previous = [UInt8](repeating: 0, count: 32)
    var buffer = [UInt8](repeating: 0, count: 256)
    while sqlite3_step(statement) == SQLITE_ROW {
        if sqlite3_column_bytes(statement, 2) == 6 { purged += 1 }
        if verify {
            let count = Int(sqlite3_column_bytes(statement, 3))
            let text = sqlite3_column_text(statement, 3)
            buffer.withUnsafeMutableBufferPointer { out in
                out.baseAddress!.update(from: previous, count: 32)
                if let text { (out.baseAddress! + 32).update(from: text, count: min(count, 200)) }
            }
            crypto_generichash(&previous, 32, buffer, UInt64(32 + min(count, 200)), nil, 0)
        }
    }
    return purged
}

// MARK: - Scale: capture with 1,000 and 1,000,000 live escrows

func scaleBenchmarks() {
    for live in [1_000, 1_000_000] {
        let ours = Box<Escrow>()
        let label = live == 1_000 ? "1k" : "1M"
        Benchmark("Capture with \(label) live escrows (ours)", configuration: configuration(iterations: 1_000)) {
            benchmark in
            for _ in benchmark.scaledIterations {
                ours.counter += 1
                blackHole(try await ours.value!.capture(try Fixtures.profile(live * 10 + ours.counter)))
            }
        } setup: {
            let source = try Fixtures.liveDatabase(escrows: live)
            // Work on a copy so that repeated runs start from the same size.
            let path = Fixtures.temporaryDirectory() + "/escrow.sqlite"
            try FileManager.default.copyItem(atPath: source, toPath: path)
            ours.value = try Fixtures.escrow(path: path)
        } teardown: {
            ours.value = nil
        }
    }
}
