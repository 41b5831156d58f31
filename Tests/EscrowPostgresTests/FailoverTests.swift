import AsyncHTTPClient
import EscrowCore
import EscrowCrypto
import EscrowPostgres
import EscrowTestSupport
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A primary and a synchronous standby (Debian's PostgreSQL, streaming replication set up with `pg_basebackup`, in
/// a temporary folder). A `serve` node with its worker reaches the primary through a proxy (as HAProxy or a cloud
/// writer endpoint would); a second node has a multi-host URL naming both servers with
/// `target_session_attrs=read-write`; a third node's URL reaches the standby directly. Under captures, erasures and
/// deliveries, the primary is killed (SIGKILL), the standby promoted and the proxy re-pointed: the first node
/// and the second carry on without a restart, the third stops saying `read_only` on `/readyz` once its server is promoted, and
/// on the new primary every acknowledged capture is there (or purged, with its audit event), every acknowledged
/// erasure stays erased, and the audit chain verifies.
@Suite("PostgreSQL: failover to a synchronous standby")
struct FailoverTests {
    @Test func nodesCarryOnAgainstThePromotedStandbyAndLoseNothingAcknowledged() async throws {
        let cluster = try await ReplicatedCluster.start()
        defer { cluster.stop() }
        let proxy = try PartitionProxy(to: "127.0.0.1", port: cluster.primaryPort)
        defer { proxy.stop() }
        let directory = TemporaryDirectory()
        let secret = "whsec_" + Data(repeating: 9, count: 32).base64EncodedString()
        let backend = try await FakeBackend.start(secret: secret)
        backend.respond { _, _ in .status(200) }
        let environment = [
            "PROFILE_ESCROW_DATABASE": cluster.url(port: proxy.port),
            "PROFILE_ESCROW_KEYRING": directory.path + "/keyring",
            "PROFILE_ESCROW_WEBHOOK_SECRET": secret,
            "PROFILE_ESCROW_BACKEND_URL": backend.url,
            "PROFILE_ESCROW_STORE_TIMEOUT": "3",
        ]
        let token = try await ProfileEscrowCLI.setUpCaptureNode(
            token: "failover",
            environment: environment,
            in: directory.path
        )
        let added = try await ProfileEscrowCLI.run(
            ["tokens", "add", "failover.ops", "--scope", "erase"],
            environment: environment,
            in: directory.path
        )
        let eraser = try #require(added.stdout.split(separator: "\n").last.map(String.init), "\(added.stderr)")

        let port = try freePort()
        let multiHostPort = try freePort()
        let standbyPort = try freePort()
        let processes = ProfileEscrowProcesses(directory: directory.path, environment: environment)
        defer { processes.killAll() }
        try processes.start("serve", Self.serve(port: port) + ["--poll-interval", "0.1s"])
        let onStandby = ProfileEscrowProcesses(
            directory: directory.path,
            environment: environment.merging(["PROFILE_ESCROW_DATABASE": cluster.url(port: cluster.standbyPort)]) { $1 }
        )
        defer { onStandby.killAll() }
        try onStandby.start("standby-node", Self.serve(port: standbyPort) + ["--no-worker"])
        let multiHost = ProfileEscrowProcesses(
            directory: directory.path,
            environment: environment.merging([
                "PROFILE_ESCROW_DATABASE": cluster.multiHostURL(target: "read-write")
            ]) { $1 }
        )
        defer { multiHost.killAll() }
        try multiHost.start("multi-host-node", Self.serve(port: multiHostPort) + ["--no-worker"])
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        defer { _ = client.shutdown() }
        try await waitUntilHealthy(client, port: port)
        try await waitUntilHealthy(client, port: standbyPort)
        try await waitUntilHealthy(client, port: multiHostPort)

        // The node on the standby says so: at start, and on /readyz.
        let standbyLog = onStandby.logs.map { ProfileEscrowCLI.text(atPath: $0) }.joined()
        #expect(standbyLog.contains("standby in recovery"), "no warning at start: \(standbyLog.prefix(2_000))")
        let early = await PartitionTests.ready(client, port: standbyPort)
        #expect(early.status == .serviceUnavailable, "/readyz of the node on the standby: \(early.status)")

        // Load: captures four at a time (two lanes to each of the first two nodes), every fifth acknowledged user
        // erased over HTTP.
        let captured = NIOLockedValueBox<[Int: String]>([:])
        let afterFailover = NIOLockedValueBox<[Int: Int]>([:])
        let erased = NIOLockedValueBox<Set<Int>>([])
        let failedOver = NIOLockedValueBox<Int?>(nil)
        let stop = NIOLockedValueBox(false)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<4 {
                group.addTask {
                    var number = lane
                    let node = lane < 2 ? port : multiHostPort
                    while !stop.withLockedValue({ $0 }) {
                        let answer = await PartitionTests.capture(client, port: node, token: token, number: number)
                        if answer.status == .created, let id = answer.id {
                            captured.withLockedValue { $0[number] = id }
                            if failedOver.withLockedValue({ $0 }) != nil {
                                afterFailover.withLockedValue { $0[node, default: 0] += 1 }
                            }
                            if number % 5 == 0, await Self.erase(client, port: node, token: eraser, number: number) {
                                erased.withLockedValue { _ = $0.insert(number) }
                            }
                        } else {
                            try await pause(for: .milliseconds(100))
                        }
                        number += 4
                    }
                }
            }
            group.addTask {
                defer { stop.withLockedValue { $0 = true } }
                try await eventually("80 captures before the failover", within: 120, every: .milliseconds(50)) {
                    captured.withLockedValue { $0.count } >= 80
                }
                try cluster.killPrimary()
                try cluster.promoteStandby()
                proxy.retarget(to: cluster.standbyPort)
                let before = captured.withLockedValue { $0.count }
                failedOver.withLockedValue { $0 = before }
                // Until 80 more captures and each node has captured since the failover (a loaded machine may give
                // the proxied node all of the first 80): at most 60 s, and the checks below fail a node that never did.
                try? await eventually("both nodes carry on", within: 60, every: .milliseconds(100)) {
                    let nodes = afterFailover.withLockedValue { $0 }
                    return captured.withLockedValue({ $0.count }) >= before + 80
                        && nodes[port, default: 0] > 0 && nodes[multiHostPort, default: 0] > 0
                }
            }
            try await group.waitForAll()
        }
        let before = try #require(failedOver.withLockedValue { $0 })
        let acknowledged = captured.withLockedValue { $0 }
        #expect(acknowledged.count >= before + 80, "the nodes captured \(acknowledged.count - before) after failover")
        let perNode = afterFailover.withLockedValue { $0 }
        #expect(perNode[port, default: 0] > 0, "the node behind the proxy captured nothing after the failover")
        #expect(perNode[multiHostPort, default: 0] > 0, "the multi-host node captured nothing after the failover")

        // The node on the former standby takes writes now, without a restart.
        try await eventually("the node on the promoted standby says ready", within: 10, every: .milliseconds(250)) {
            await PartitionTests.ready(client, port: standbyPort).status == .ok
        }
        // Let the worker deliver what is due, then stop both nodes.
        // (Real time: the workers are real processes; what they deliver by then is checked below, whatever it is.)
        try await pause(for: .seconds(3))
        #expect(processes.signal("serve", SIGTERM)?.terminationStatus == 0)
        #expect(onStandby.signal("standby-node", SIGTERM)?.terminationStatus == 0)
        #expect(multiHost.signal("multi-host-node", SIGTERM)?.terminationStatus == 0)

        var configuration = PostgresEscrowStore.Configuration()
        configuration.readOnly = true
        configuration.operationTimeout = 60
        let store = try await PostgresEscrowStore.connect(
            url: cluster.url(port: cluster.standbyPort),
            configuration: configuration,
            logger: TestDatabase.logger
        )
        let keyring = try Keyring.load(path: directory.path + "/keyring")
        let erasedUsers = erased.withLockedValue { $0 }
        var lost = 0
        for (number, id) in acknowledged {
            let escrowID = try #require(EscrowID(hex: id))
            if try await store.record(id: escrowID) != nil {
                #expect(!erasedUsers.contains(number), "user \(number)'s erasure was acknowledged, its escrow is back")
                continue
            }
            let events = try await store.auditEvents(escrowID: id, limit: 100)
            if !events.contains(where: { $0.draft.type == .purged }) { lost += 1 }
        }
        #expect(lost == 0, "\(lost) of \(acknowledged.count) acknowledged captures lost in the failover")
        for number in erasedUsers {
            let blind = keyring.blindIndex(userIdentifier: Self.user(number))
            #expect(try await store.record(blindIndex: blind) == nil, "user \(number) erased, and back")
        }
        let events = try await allEvents(store)
        var verifier = AuditChain.Verifier()
        for event in events { verifier.consume(event) }
        verifier.finish(head: try await store.auditHead())
        #expect(verifier.isIntact, "the audit chain verifies on the new primary")
        await store.close()
    }

    static func serve(port: Int) -> [String] {
        [
            "serve", "--host", "127.0.0.1", "--port", "\(port)", "--rate-limit", "100000", "--rate-burst", "100000",
        ]
    }

    /// The user identifier of `ServeKillTests.body(number)`.
    static func user(_ number: Int) -> String { "000000.pgtest\(String(format: "%020d", number)).0002" }

    static func erase(_ client: HTTPClient, port: Int, token: String, number: Int) async -> Bool {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/escrows/\(user(number))")
        request.method = .DELETE
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        guard let response = try? await client.execute(request, timeout: .seconds(30)) else { return false }
        _ = try? await response.body.collect(upTo: 65_536)
        return response.status == .noContent
    }
}

/// A primary and one synchronous standby of Debian's PostgreSQL in a temporary folder, on 127.0.0.1 and free
/// ports, run as `postgres` when the tests run as root (as scripts/postgres.sh does).
struct ReplicatedCluster: Sendable {
    let directory: String
    let bin: String
    let user: String
    let primaryPort: Int
    let standbyPort: Int

    struct Failed: Error, CustomStringConvertible {
        var description: String
    }

    func url(port: Int) -> String {
        "postgresql://\(user)@127.0.0.1:\(port)/escrow?sslmode=disable"
    }

    /// Both servers, the primary first.
    func multiHostURL(target: String) -> String {
        "postgresql://\(user)@127.0.0.1:\(primaryPort),127.0.0.1:\(standbyPort)/escrow?sslmode=disable"
            + "&target_session_attrs=\(target)"
    }

    static func start() async throws -> ReplicatedCluster {
        let bin =
            ProcessInfo.processInfo.environment["PROFILE_ESCROW_TEST_POSTGRES_BIN"]
            ?? "/usr/lib/postgresql/15/bin"
        let directory = "/tmp/profile-escrow-failover-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory + "/socket", withIntermediateDirectories: true)
        let root = getuid() == 0
        if root { try shell("chown -R postgres: \(directory) && chmod 0755 \(directory)") }
        let cluster = ReplicatedCluster(
            directory: directory,
            bin: bin,
            user: root ? "postgres" : NSUserName(),
            primaryPort: try freePort(),
            standbyPort: try freePort()
        )
        try cluster.owner("\(bin)/initdb -D \(directory)/primary -U \(cluster.user) --auth=trust --no-locale -E UTF8")
        try cluster.append(
            "\(directory)/primary/postgresql.conf",
            """
            listen_addresses = '127.0.0.1'
            port = \(cluster.primaryPort)
            unix_socket_directories = '\(directory)/socket'
            synchronous_commit = on
            wal_level = replica
            max_wal_senders = 4
            fsync = on
            """
        )
        try cluster.owner("\(bin)/pg_ctl -D \(directory)/primary -l \(directory)/primary.log -w -t 60 start")
        try cluster.owner(
            "\(bin)/psql -h \(directory)/socket -p \(cluster.primaryPort) -U \(cluster.user) -d postgres -q "
                + "-c 'CREATE DATABASE escrow'"
        )
        try cluster.owner(
            "\(bin)/pg_basebackup -h 127.0.0.1 -p \(cluster.primaryPort) -U \(cluster.user) -D \(directory)/standby "
                + "-R -X stream"
        )
        // postgresql.auto.conf (written by -R) is read last: the standby's own settings go there.
        try cluster.append(
            "\(directory)/standby/postgresql.auto.conf",
            """
            port = \(cluster.standbyPort)
            primary_conninfo = 'host=127.0.0.1 port=\(cluster.primaryPort) user=\(cluster.user) application_name=standby1'
            """
        )
        try cluster.owner("\(bin)/pg_ctl -D \(directory)/standby -l \(directory)/standby.log -w -t 60 start")
        // Synchronous once the standby exists (before, every commit would wait for it).
        try cluster.owner(
            "\(bin)/psql -h \(directory)/socket -p \(cluster.primaryPort) -U \(cluster.user) -d postgres -q "
                + "-c \"ALTER SYSTEM SET synchronous_standby_names = 'standby1'\" -c 'SELECT pg_reload_conf()'"
        )
        // Synchronous before anything is captured: the standby is a real server catching up with the primary.
        do {
            try await eventually("the standby synchronous", within: 10, every: .milliseconds(100)) {
                let state = try cluster.owner(
                    "\(bin)/psql -h \(directory)/socket -p \(cluster.primaryPort) -U \(cluster.user) -d postgres -At "
                        + "-c \"SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'\""
                )
                return state.trimmingCharacters(in: .whitespacesAndNewlines) == "sync"
            }
        } catch {
            cluster.stop()
            throw Failed(description: "the standby did not become synchronous")
        }
        return cluster
    }

    /// SIGKILL to the primary's postmaster and every backend (no shutdown checkpoint, no goodbye to the standby).
    func killPrimary() throws {
        let pid = Int32(
            ProfileEscrowCLI.text(atPath: directory + "/primary/postmaster.pid").split(separator: "\n").first
                .flatMap { Int32($0) } ?? 0
        )
        guard pid > 0 else { throw Failed(description: "no postmaster.pid") }
        _ = try? Self.shell("pkill -KILL -P \(pid)")
        kill(pid, SIGKILL)
    }

    func promoteStandby() throws {
        try owner("\(bin)/pg_ctl -D \(directory)/standby -w -t 60 promote")
    }

    func stop() {
        for node in ["standby", "primary"] {
            _ = try? owner("\(bin)/pg_ctl -D \(directory)/\(node) -m immediate -w stop")
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    @discardableResult
    func owner(_ command: String) throws -> String {
        try Self.shell(getuid() == 0 ? "runuser -u postgres -- sh -c \(Self.quoted(command))" : command)
    }

    func append(_ path: String, _ text: String) throws {
        try owner("cat >> \(path) <<'CONF'\n\(text)\nCONF")
    }

    static func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }

    /// Through `OwnServer.shell`: a server started here must not inherit this process's descriptors.
    @discardableResult
    static func shell(_ command: String) throws -> String {
        try OwnServer.shell(["/bin/sh", "-c", command])
    }
}
