import EscrowCore
import EscrowCrypto
import EscrowPostgres
import EscrowTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A `replay` worker on PostgreSQL killed with SIGKILL while the backend holds its deliveries open: another worker
/// redelivers each escrow once the dead worker's lease ran out, with the escrow's one Idempotency-Key; every escrow
/// is confirmed and purged exactly once, and the audit chain verifies.
@Suite("PostgreSQL: kill -9 of a replay worker mid-delivery")
struct ReplayKillTests {
    @Test func anotherWorkerRedeliversAfterTheLease() async throws {
        try await TestDatabase.with { database in
            let directory = TemporaryDirectory()
            let secret = try await ProfileEscrowCLI.run(["webhook-secret"], in: directory.path).stdout
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let environment = [
                "PROFILE_ESCROW_DATABASE": database.url,
                "PROFILE_ESCROW_KEYRING": directory.path + "/keyring",
                "PROFILE_ESCROW_WEBHOOK_SECRET": secret,
            ]
            let initialized = try await ProfileEscrowCLI.run(["keys", "init"], environment: environment, in: directory.path)
            #expect(initialized.status == 0, "\(initialized.stderr)")
            let count = 4
            var ids: [String] = []
            for number in 0..<count {
                let captured = try await ProfileEscrowCLI.run(
                    ["capture"],
                    stdin: ServeKillTests.body(number),
                    environment: environment,
                    in: directory.path
                )
                #expect(captured.status == 0, "\(captured.stderr)")
                ids.append(try #require(captured.stdout.split(separator: "\n").last.map(String.init)))
            }

            let backend = try await FakeBackend.start(secret: secret)
            backend.respond { _, _ in .hold }
            let lease = 3.0
            let processes = ProfileEscrowProcesses(directory: directory.path, environment: environment)
            defer { processes.killAll() }
            func launch(_ name: String) throws {
                try processes.start(
                    name,
                    [
                        "replay", "--backend", backend.url, "--concurrency", "\(count)", "--lease", "3s",
                        "--delivery-timeout", "2s", "--backoff-base", "50ms", "--backoff-max", "1s", "--poll-interval",
                        "100ms", "--worker-id", name, "--verbose",
                    ]
                )
            }

            // The first worker claims every escrow; the backend holds each request open; SIGKILL.
            try launch("worker-killed")
            try await eventually("the backend to hold every delivery", within: 60, every: .milliseconds(100)) {
                Set(backend.requests.compactMap(\.escrowID)).count == count
            }
            let first = try #require(processes.signal("worker-killed", SIGKILL))
            #expect(first.terminationReason == .uncaughtSignal, "the worker was killed, not stopped")
            let held = backend.requests
            #expect(held.allSatisfy { $0.reply == .hold }, "no delivery of the killed worker was answered")
            backend.respond { _, _ in .status(200) }

            // A second worker redelivers once the leases ran out.
            try launch("worker-second")
            let store = try await database.open()
            try await eventually("every escrow purged", within: 120, every: .milliseconds(100)) {
                try await allEvents(store).filter { $0.draft.type == .purged }.count >= count
            }
            let second = try #require(processes.signal("worker-second", SIGTERM))
            #expect(second.terminationReason == .exit && second.terminationStatus == 0)

            let requests = backend.requests
            #expect(requests.allSatisfy { $0.signatureValid }, "every delivery is signed with the webhook secret")
            let events = try await allEvents(store)
            for id in ids {
                let purges = events.filter { $0.draft.escrowID == id && $0.draft.type == .purged }
                #expect(purges.map(\.draft.detail) == ["confirmed"], "escrow \(id) purged exactly once, confirmed")
                let deliveries = requests.filter { $0.escrowID == id }
                #expect(deliveries.count >= 2, "escrow \(id) was redelivered")
                #expect(Set(deliveries.compactMap(\.idempotencyKey)) == [id], "one Idempotency-Key per escrow")
                #expect(deliveries.contains { $0.reply == .status(200) }, "escrow \(id) was confirmed by an answer")
                let heldAt = try #require(held.first { $0.escrowID == id }?.at)
                let redelivered = try #require(deliveries.first { $0.at > heldAt }?.at)
                #expect(
                    redelivered.timeIntervalSince(heldAt) >= lease - 0.5,
                    "redelivered only after the lease ran out: \(redelivered.timeIntervalSince(heldAt)) s"
                )
                #expect(try await store.record(id: try #require(EscrowID(hex: id))) == nil, "escrow \(id) purged")
            }
            var verifier = AuditChain.Verifier()
            for event in events { verifier.consume(event) }
            verifier.finish(head: try await store.auditHead())
            #expect(verifier.isIntact, "the audit chain verifies after the kill")
            await store.close()
            await backend.stop()

            let report = try await ProfileEscrowCLI.run(
                ["purge-report", "--verify"],
                environment: environment,
                in: directory.path
            )
            #expect(report.status == 0, "purge-report --verify: \(report.stdout.suffix(400)) \(report.stderr)")
            for path in processes.logs {
                let log = try String(contentsOfFile: path, encoding: .utf8)
                #expect(!log.isEmpty)
                // The database is named pgtest_…: the user identifiers are 000000.pgtest….
                #expect(
                    !log.contains("example.invalid") && !log.contains("000000.pgtest"),
                    "\(path) logged personal data"
                )
            }
        }
    }
}
