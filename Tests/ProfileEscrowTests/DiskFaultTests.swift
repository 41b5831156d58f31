import AsyncHTTPClient
import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import GRDB
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A disk that fails one write or one fsync of the store's WAL (EIO, ENOSPC) under a `serve` node capturing with
/// its replay worker running, then loses power (scripts/faults/faultshim.c): the failure is logged as critical, the
/// node stops acknowledging captures until it has written its files again from the page cache and synced them, then
/// goes on by itself, and every capture it acknowledged, before and after, is on the disk after the power cut. (A
/// failed fsync loses its pages from the disk while the page cache keeps them: commits made after it, including the
/// worker's leases, which do not wait for the disk, would chain after frames the disk never got, and WAL recovery
/// would stop before them, unless the store writes its files again.)
@Suite("Failing disks")
struct DiskFaultTests {
    /// A `serve` node on a fresh store whose folder is watched by the fault shim with `fault`: healthy, with a capture
    /// token. `stop()` kills it and shuts the client down.
    struct FaultedNode {
        let scratch: TemporaryDirectory
        let data: String
        let token: String
        let shim: FaultShim
        let processes: ProfileEscrowProcesses
        let client: HTTPClient
        let port: Int

        init(fault: String, extraArguments: [String]) async throws {
            scratch = TemporaryDirectory()
            data = scratch.path + "/data"
            try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
            let environment = [
                "PROFILE_ESCROW_DATABASE": data + "/escrow.sqlite",
                "PROFILE_ESCROW_KEYRING": data + "/keyring",
                "PROFILE_ESCROW_WEBHOOK_SECRET": OperatorConventionTests.secret,
            ]
            token = try await ProfileEscrowCLI.setUpCaptureNode(token: "disk.fault", environment: environment, in: data)
            // The store's schema made before the faults start, so that they meet captures, not its migrations.
            let opened = try await ProfileEscrowCLI.run(["sweep"], environment: environment, in: data)
            guard opened.status == 0 else {
                throw ProfileEscrowCLI.SetUpFailed(description: "sweep: \(opened.stderr)")
            }
            shim = try await FaultShim(directory: data, scratch: scratch.path)
            try await shim.snapshot()
            port = try freePort()
            processes = ProfileEscrowProcesses(
                directory: scratch.path,
                environment: environment.merging(shim.environment(fail: fault)) { $1 }
            )
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            do {
                try processes.start(
                    "serve",
                    [
                        "serve", "--host", "127.0.0.1", "--port", "\(port)", "--rate-limit", "100000", "--rate-burst",
                        "100000",
                    ] + extraArguments
                )
                try await waitUntilHealthy(client, port: port)
            } catch {
                // A node that never came up: its process and client stopped, its log in the failure.
                processes.killAll()
                try? await client.shutdown()
                let log = processes.logs.map { ProfileEscrowCLI.text(atPath: $0) }.joined()
                throw ProfileEscrowCLI.SetUpFailed(description: "serve did not come up (\(error)): \(log.suffix(2000))")
            }
            self.client = client
        }

        func stop() {
            processes.killAll()
            _ = client.shutdown()
        }

        func capture(_ number: Int) async -> (HTTPResponseStatus, String?) {
            await DiskFaultTests.capture(client, port: port, token: token, number: number)
        }

        var log: String { processes.logs.map { ProfileEscrowCLI.text(atPath: $0) }.joined() }

        /// After the power cut (serve killed): the disk put in place of the folder; how many of `acknowledged` are
        /// missing from the store, and whether its audit chain verifies.
        func afterPowerCut(_ acknowledged: [String]) async throws -> (missing: Int, chainIntact: Bool) {
            try await shim.restore()
            let store = try SQLiteEscrowStore(path: data + "/escrow.sqlite", logger: Logger(label: "disk-fault-test"))
            defer { try? store.close() }
            var missing = 0
            for id in acknowledged where try await store.record(id: try #require(EscrowID(hex: id))) == nil {
                missing += 1
            }
            return (missing, try await auditChainIsIntact(store))
        }

        func ready() async throws -> HTTPResponseStatus {
            try await client.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/readyz"), timeout: .seconds(10))
                .status
        }
    }

    @Test(arguments: ["fsync:escrow.sqlite-wal:40:EIO", "write:escrow.sqlite-wal:300:EIO"])
    func aFailedWriteOrFsyncStopsTheStoreUntilRecoveredAndLosesNothingAcknowledged(fault: String) async throws {
        let node = try await FaultedNode(
            fault: fault,
            extraArguments: ["--backend", "http://127.0.0.1:9/register", "--poll-interval", "0.05s"]
        )
        defer { node.stop() }
        let (client, port, token, processes) = (node.client, node.port, node.token, node.processes)

        // Captures, eight at a time, until the fault has happened (or 600 were sent). The write it hits may be a
        // capture's (answered 503) or the worker's, and the store may recover before the next capture comes: the
        // log says when it happened.
        let acknowledged = NIOLockedValueBox<[String]>([])
        var number = 0
        while number < 600, !node.log.contains("failed with a disk error") {
            await withTaskGroup(of: Void.self) { group in
                for one in number..<(number + 8) {
                    group.addTask {
                        let (status, id) = await Self.capture(client, port: port, token: token, number: one)
                        if status == .created, let id { acknowledged.withLockedValue { $0.append(id) } }
                    }
                }
            }
            number += 8
        }
        #expect(node.log.contains("failed with a disk error"), "\(fault): the fault never happened")
        // Recovered by itself (the files written again and synced), then captures are acknowledged again.
        try await eventually("\(fault): captures acknowledged again", within: 60, every: .milliseconds(200)) {
            let (status, id) = await Self.capture(client, port: port, token: token, number: 1_000)
            if status == .created, let id { acknowledged.withLockedValue { $0.append(id) } }
            return status == .created
        }
        for one in 1..<9 {
            let (status, id) = await Self.capture(client, port: port, token: token, number: 1_000 + one)
            #expect(status == .created, "\(fault): a capture after the recovery answered \(status)")
            if status == .created, let id { acknowledged.withLockedValue { $0.append(id) } }
        }
        #expect(try await node.ready() == .ok, "\(fault): /readyz after the recovery")

        // The power cut.
        let serve = processes.signal("serve")
        #expect(serve?.terminationReason == .uncaughtSignal)
        let log = processes.logs.map { ProfileEscrowCLI.text(atPath: $0) }.joined()
        #expect(log.contains("\"critical\""), "\(fault): no critical log line")
        #expect(log.contains("disk error"), "\(fault): the log does not name the disk error")
        #expect(log.contains("written again from the page cache and synced"), "\(fault): the recovery is not logged")
        let ids = acknowledged.withLockedValue { $0 }
        let (missing, chainIntact) = try await node.afterPowerCut(ids)
        #expect(missing == 0, "\(fault): \(missing) of \(ids.count) acknowledged captures lost in the power cut")
        #expect(chainIntact, "\(fault): the audit chain does not verify after the power cut")
    }

    /// A disk whose WAL fsyncs keep failing: the recovery's attempts fail too, and the store stays refused (captures
    /// `503`, `/readyz` `503`), saying in its log that it tries again; nothing is acknowledged meanwhile.
    @Test func aDiskThatKeepsFailingStaysRefused() async throws {
        let node = try await FaultedNode(fault: "fsync:escrow.sqlite-wal:40:EIO:0", extraArguments: ["--no-worker"])
        defer { node.stop() }
        var number = 0
        var refused = false
        while number < 200, !refused {
            refused = await node.capture(number).0 == .serviceUnavailable
            number += 1
        }
        #expect(refused, "the failing disk never refused a capture")
        try await eventually("two recovery attempts failed", within: 30) {
            node.log.components(separatedBy: "could not be written again and synced yet").count >= 3
        }
        #expect(await node.capture(5_000).0 == .serviceUnavailable)
        #expect(try await node.ready() == .serviceUnavailable)
    }

    /// A full disk (forty WAL writes refused with ENOSPC, then space again): the captures it refused were not stored,
    /// the store goes on by itself once there is space (no restart), and after a power cut every capture it
    /// acknowledged, before and after, is on the disk.
    @Test func aFullDiskRefusesThenRecoversWithoutARestart() async throws {
        // No worker: every write is a capture's, so the full disk answers captures.
        let node = try await FaultedNode(
            fault: "write:escrow.sqlite-wal:200:ENOSPC:40",
            extraArguments: ["--no-worker"]
        )
        defer { node.stop() }

        var acknowledged: [String] = []
        var refused = 0
        var acknowledgedAfterRefusal = 0
        var number = 0
        // One at a time, so that each answer is that capture's alone; until the disk has refused some and then
        // taken twenty more (or 600 were sent).
        while number < 600, acknowledgedAfterRefusal < 20 {
            let (status, id) = await node.capture(number)
            number += 1
            if status == .created, let id {
                acknowledged.append(id)
                if refused > 0 { acknowledgedAfterRefusal += 1 }
            } else {
                #expect(status == .serviceUnavailable, "a full disk answered \(status)")
                refused += 1
            }
        }
        #expect(refused > 0, "the full disk never refused a capture")
        #expect(acknowledgedAfterRefusal == 20, "captures did not go on once there was space (refused \(refused))")
        try await eventually("/readyz ready again", within: 20) { try await node.ready() == .ok }

        // The power cut: everything acknowledged, before and after the full disk, is there; the chain verifies.
        _ = node.processes.signal("serve")
        let log = node.log
        #expect(log.contains("the disk is full"))
        #expect(!log.contains("\"critical\""), "a full disk stops nothing")
        let (missing, chainIntact) = try await node.afterPowerCut(acknowledged)
        #expect(missing == 0, "\(missing) of \(acknowledged.count) acknowledged captures lost in the power cut")
        #expect(chainIntact, "the audit chain does not verify after the power cut")
    }

    /// Every write of the store failing: `replay --once` does not exit 0, and says the outcomes are not known
    /// recorded.
    @Test func replayOnceWithEveryWriteFailingDoesNotSucceed() async throws {
        let scratch = TemporaryDirectory()
        let data = scratch.path + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        let environment = [
            "PROFILE_ESCROW_DATABASE": data + "/escrow.sqlite",
            "PROFILE_ESCROW_KEYRING": data + "/keyring",
            "PROFILE_ESCROW_BACKEND_URL": "http://127.0.0.1:9/register",
            "PROFILE_ESCROW_WEBHOOK_SECRET": OperatorConventionTests.secret,
        ]
        #expect(try await ProfileEscrowCLI.run(["keys", "init"], environment: environment, in: data).status == 0)
        for one in 0..<5 {
            let body =
                #"{"userIdentifier":"000000.disk\#(String(format: "%020d", one)).0002","email":"d@example.invalid"}"#
            #expect(try await ProfileEscrowCLI.run(["capture"], stdin: body, environment: environment, in: data).status == 0)
        }
        let shim = try await FaultShim(directory: data, scratch: scratch.path)
        try await shim.snapshot()
        let replay = try await ProfileEscrowCLI.run(
            ["replay", "--once"],
            environment: environment.merging(shim.environment(fail: "write:escrow.sqlite:1:EIO:0")) { $1 },
            in: data
        )
        #expect(replay.status != 0, "replay --once exited 0 with every write failing: \(replay.stdout)")
        #expect(!replay.stderr.contains("will be delivered again"))
    }

    static func capture(
        _ client: HTTPClient,
        port: Int,
        token: String,
        number: Int
    ) async -> (HTTPResponseStatus, String?) {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/escrows")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(
            ByteBuffer(
                string:
                    #"{"userIdentifier":"000000.disk\#(String(format: "%020d", number)).0002","email":"d\#(number)@example.invalid"}"#
            )
        )
        guard let response = try? await client.execute(request, timeout: .seconds(30)),
            let body = try? await response.body.collect(upTo: 65_536)
        else { return (.gatewayTimeout, nil) }
        let json = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
        return (response.status, json?["escrowId"] as? String)
    }
}
