import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import Logging
import ProfileEscrow
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `profile-escrow replay`, run as an operator would, against the loopback backend stub.
@Suite("Replay CLI", .serialized)
struct ReplayCLITests {
    @Test func replayOnceDeliversEverythingDueAndPrintsASummary() async throws {
        let cli = CLITests()
        let secret = WebhookSecret.generateText()
        let stub = try await FakeBackend.start(secret: secret)
        defer { Task { await stub.stop() } }
        stub.respond { _, _ in .status(201) }
        await #expect(try cli.run(["keys", "init"]).status == 0)
        for number in 0..<3 { await #expect(try cli.run(["capture"], stdin: CLITests.body(number)).status == 0) }

        let result = try await cli.run(
            [
                "replay", "--once", "--backend", stub.url, "--concurrency", "2", "--lease", "1m", "--delivery-timeout",
                "5s",
            ],
            environment: ["PROFILE_ESCROW_WEBHOOK_SECRET": secret]
        )
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("delivered 3: 3 confirmed, 0 accepted, 0 retried, 0 dead"), "\(result.stdout)")
        #expect(stub.requests.count == 3 && stub.violations.isEmpty)

        let report = try await cli.run(["purge-report", "--verify", "--format", "json"])
        #expect(report.status == 0)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(report.stdout.utf8)) as? [String: Any])
        #expect((json["purged"] as? [String: Int])?["confirmed"] == 3)
        for output in [result.stdout, result.stderr, report.stdout] {
            for token in Fake.tokens { #expect(!output.contains(token)) }
        }
        // Nothing is due any more; the backend URL may come from the environment too.
        let again = try await cli.run(
            ["replay", "--once"],
            environment: ["PROFILE_ESCROW_WEBHOOK_SECRET": secret, "PROFILE_ESCROW_BACKEND_URL": stub.url]
        )
        #expect(again.status == 0 && again.stdout.contains("delivered 0"), "\(again.stderr)")
    }

    @Test func replayRefusesBadSettings() async throws {
        let cli = CLITests()
        await #expect(try cli.run(["keys", "init"]).status == 0)
        let secret = ["PROFILE_ESCROW_WEBHOOK_SECRET": WebhookSecret.generateText()]
        let backend = ["--backend", "http://127.0.0.1:9/register"]

        let unsigned = try await cli.run(["replay", "--once"] + backend)
        #expect(unsigned.status == 2)
        #expect(unsigned.stderr.contains("PROFILE_ESCROW_WEBHOOK_SECRET"), "\(unsigned.stderr)")
        let badSecret = try await cli.run(
            ["replay", "--once"] + backend,
            environment: ["PROFILE_ESCROW_WEBHOOK_SECRET": "hunter2hunter2"]
        )
        #expect(badSecret.status == 2 && badSecret.stderr.contains("whsec_") && !badSecret.stderr.contains("hunter2"))
        await #expect(try cli.run(["replay", "--once"], environment: secret).status == 2, "no backend")
        await #expect(
            try cli.run(["replay", "--once", "--backend", "ftp://example.invalid/"], environment: secret).status == 2
        )
        let lease = try await cli.run(
            ["replay", "--once", "--lease", "10s", "--delivery-timeout", "30s"] + backend,
            environment: secret
        )
        #expect(lease.status == 2 && lease.stderr.contains("at least the delivery timeout"), "\(lease.stderr)")
        // As long as the delivery timeout is not enough: the outcome needs a margin to be recorded in.
        let noMargin = try await cli.run(
            ["replay", "--once", "--lease", "30s", "--delivery-timeout", "30s"] + backend,
            environment: secret
        )
        #expect(noMargin.status == 2 && noMargin.stderr.contains("plus a margin of 3s"), "\(noMargin.stderr)")
        await #expect(try cli.run(["replay", "--once", "--backoff-base", "soon"] + backend, environment: secret).status == 2)
        await #expect(try cli.run(["replay", "--once", "--concurrency", "0"] + backend, environment: secret).status == 2)
        await #expect(try cli.run(["replay", "--once", "--max-attempts", "0"] + backend, environment: secret).status == 2)
        let noKeyring = try await cli.run(
            ["replay", "--once", "--keyring", cli.directory.path + "/missing"] + backend,
            environment: secret
        )
        #expect(noKeyring.status == 4, "\(noKeyring.stderr)")
    }
}

/// The worker process killed with SIGKILL at random moments: nothing is lost, nothing purged
/// without a confirming answer, and every redelivery uses the escrow's one Idempotency-Key.
@Suite("Replay crash safety", .serialized)
struct ReplayCrashTests {
    @Test func sigkillAtRandomMomentsLosesNothing() async throws {
        let directory = TemporaryDirectory()
        let database = directory.path + "/escrow.sqlite"
        let keyringPath = directory.path + "/keyring"
        let keyring = Keyring.generate()
        try keyring.write(path: keyringPath, overwrite: false)
        let ids = try await Self.capture(200, database: database, keyring: keyring)

        let secret = WebhookSecret.generateText()
        let stub = try await FakeBackend.start(secret: secret)
        defer { Task { await stub.stop() } }
        stub.respond { request, count in
            let roll = Int(request.idempotencyKey?.utf8.last ?? 0) % 10
            if count == 0, roll < 2 { return .status(503, headers: ["Retry-After": "0"]) }
            return .delayed(0.03 + Double(roll) / 100, .status(roll == 9 ? 409 : 200))
        }
        func launch(_ number: Int) throws -> ChildProcess {
            let process = ChildProcess()
            process.executableURL = CLITests.binary
            process.arguments = [
                "replay", "--backend", stub.url, "--concurrency", "4", "--lease", "1s", "--delivery-timeout", "500ms",
                "--backoff-base", "50ms", "--backoff-max", "1s", "--poll-interval", "50ms", "--verbose",
            ]
            var environment = ProcessInfo.processInfo.environment
            environment["PROFILE_ESCROW_DATABASE"] = database
            environment["PROFILE_ESCROW_KEYRING"] = keyringPath
            environment["PROFILE_ESCROW_WEBHOOK_SECRET"] = secret
            process.environment = environment
            let log = directory.path + "/worker-\(number).log"
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            let output = FileHandle(forWritingAtPath: log)
            process.standardOutput = output
            process.standardError = output
            try process.run()
            return process
        }

        var kills = 0
        for number in 0..<5 {
            let process = try launch(number)
            // A kill at a random moment of the worker's run (real time: the worker is a real process).
            try await pause(for: .milliseconds(Int64.random(in: 300...1_200)))
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                kills += 1
            }
            await process.exited()
            let log = ProfileEscrowCLI.text(atPath: directory.path + "/worker-\(number).log")
            #expect(
                process.terminationReason == .uncaughtSignal,
                "worker \(number) ended by itself: \(log.suffix(800))"
            )
        }
        #expect(kills == 5)

        // A last worker finishes the job, then stops on SIGTERM (graceful shutdown). The killed ones may
        // have finished it already: then it only starts and stops.
        var readOnly = SQLiteEscrowStore.Configuration()
        readOnly.readOnly = true
        let reader = try SQLiteEscrowStore(path: database, configuration: readOnly, logger: Logger(label: "test"))
        let leftForTheLast = try await reader.summary(at: Date()).live.values.reduce(0, +)
        let last = try launch(5)
        let lastLog = directory.path + "/worker-5.log"
        try await eventually("the last worker to start", within: 60) {
            ProfileEscrowCLI.text(atPath: lastLog).contains("replay worker started")
        }
        try await eventually("every escrow confirmed", within: 120) {
            try await reader.summary(at: Date()).live.values.reduce(0, +) == 0
        }
        kill(last.processIdentifier, SIGTERM)
        try await eventually("the worker to stop on SIGTERM", within: 30) { !last.isRunning }
        #expect(last.terminationReason == .exit && last.terminationStatus == 0)

        #expect(stub.violations.isEmpty, "\(stub.violations.prefix(5))")
        let events = try await reader.auditEvents(after: 0, limit: 100_000).map(\.draft)
        let confirming = Set(stub.answered.filter { [200, 201, 204, 409].contains($0.status) }.map(\.key))
        for id in ids {
            let purges = events.filter { $0.escrowID == id.hex && $0.type == .purged }
            #expect(purges.map(\.detail) == ["confirmed"])
            #expect(confirming.contains(id.hex), "purged without a confirming answer")
            let requests = stub.requests.filter { $0.escrowID == id.hex }
            #expect(!requests.isEmpty && Set(requests.compactMap(\.idempotencyKey)) == [id.hex])
        }
        let report = try await PurgeReport.build(store: reader, verify: true)
        #expect(report.captured == 200 && report.purged[.confirmed] == 200 && report.overdue == 0)
        #expect(report.chain?.verified == true && !report.hasProblem)
        // Every worker logged at --verbose (debug), killed or not: never a name, email or user identifier.
        for number in 0...5 {
            let path = directory.path + "/worker-\(number).log"
            let log = ProfileEscrowCLI.text(atPath: path)
            // The last one ran until SIGTERM: the scan is not of empty files.
            if number == 5 {
                // A delivery logs "escrow delivered", or for a confirmed one the "escrow purged" line.
                let expected = leftForTheLast > 0 ? ["escrow delivered", "escrow purged"] : ["replay worker stopped"]
                #expect(expected.contains { log.contains($0) }, "\(log.suffix(400))")
            }
            for token in Fake.tokens {
                #expect(!log.contains(token), "worker \(number) logged personal data")
            }
        }
        let redelivered = ids.filter { id in stub.requests.filter { $0.escrowID == id.hex }.count > 1 }.count
        print("crash test: \(stub.requests.count) deliveries for 200 escrows, \(redelivered) delivered more than once")
    }

    /// Captures fake profiles in this process, then closes the store (giving the writer slot back).
    static func capture(_ count: Int, database: String, keyring: Keyring) async throws -> [EscrowID] {
        let store = try SQLiteEscrowStore(path: database, logger: Logger(label: "test"))
        let escrow = Escrow(store: store, keyring: keyring, logger: Logger(label: "test"))
        var ids: [EscrowID] = []
        for number in 0..<count { ids.append(try await escrow.capture(try Fake.profile(number)).escrowID) }
        try store.close()
        return ids
    }
}
