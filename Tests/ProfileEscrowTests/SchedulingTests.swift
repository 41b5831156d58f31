import AsyncHTTPClient
import EscrowTestSupport
import Foundation
import Testing

/// `serve` and `replay` run their threads under Linux's batch policy unless `--scheduling normal` says otherwise.
@Suite("Process scheduling")
struct SchedulingTests {
    /// `SCHED_OTHER`, `SCHED_BATCH` and `SCHED_IDLE` as `/proc/<pid>/task/<tid>/stat` shows them.
    static let normal = 0
    static let batch = 3
    static let idle = 5

    @Test(
        "serve: every thread batch by default but the sealing keys' (idle), every one normal with PROFILE_ESCROW_SCHEDULING=normal"
    )
    func serveThreads() async throws {
        for (setting, expected, sealingKeys) in [(nil, Self.batch, Self.idle), ("normal", Self.normal, Self.normal)] {
            try await Self.withServe(setting.map { ["PROFILE_ESCROW_SCHEDULING": $0] } ?? [:]) { serve, _ in
                let threads = Self.threads(serve.processIdentifier)
                let policies = threads.filter { $0.name != "sealing-keys" }.map(\.policy)
                #expect(policies.count >= 3, "serve has its threads: \(threads)")
                #expect(policies.allSatisfy { $0 == expected }, "\(setting ?? "default"): \(threads)")
                // The thread that makes sealing keys ahead of captures runs only on an otherwise idle core, when this
                // process moves its own threads (batch); else it keeps the process's policy.
                let keys = threads.filter { $0.name == "sealing-keys" }.map(\.policy)
                #expect(keys == [sealingKeys], "\(setting ?? "default"): \(threads)")
            }
        }
    }

    @Test(
        "serve started under another policy keeps it: idle stays idle, and threads already batch cost no call",
        arguments: [(["/usr/bin/chrt", "--idle", "0"], Self.idle), (["/usr/bin/chrt", "--batch", "0"], Self.batch)]
    )
    func startedUnderAnotherPolicy(_ launcher: [String], _ expected: Int) async throws {
        try await Self.withServe(["PROFILE_ESCROW_LOG_LEVEL": "debug"], launcher: launcher) { serve, log in
            let policies = Self.threadPolicies(serve.processIdentifier)
            #expect(policies.count >= 3 && policies.allSatisfy { $0 == expected }, "\(launcher): \(policies)")
            // No thread was under the default policy, so none was moved: no sched_setscheduler call was made (a
            // seccomp filter such as the systemd unit's would have killed the process for it).
            let log = log()
            #expect(log.contains(#""message":"threads moved to the batch scheduling policy","threads":"0""#), "\(log)")
        }
    }

    /// Starts a healthy `serve --no-worker` on a fresh store (through `launcher`, when given) and calls `body` with its
    /// process and a reader of its log: by the time it answers, its event loops and Swift's pool have their threads.
    static func withServe(
        _ environment: [String: String],
        launcher: [String] = [],
        _ body: (ChildProcess, () -> String) throws -> Void
    ) async throws {
        let cli = CLITests()
        await #expect(try cli.run(["keys", "init"]).status == 0)
        let processes = ProfileEscrowProcesses(
            directory: cli.directory.path,
            environment: ["PROFILE_ESCROW_DATABASE": cli.database, "PROFILE_ESCROW_KEYRING": cli.keyring]
                .merging(environment) { $1 }
        )
        defer { processes.killAll() }
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            _ = try await processes.startHealthyCaptureNode("serve", client: client, launcher: launcher)
            try body(try #require(processes.process("serve"))) {
                processes.logs.map(ProfileEscrowCLI.text(atPath:)).joined()
            }
        } catch {
            try await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }

    @Test("replay, running as its own process: every thread is batch")
    func replayThreads() async throws {
        let cli = CLITests()
        await #expect(try cli.run(["keys", "init"]).status == 0)
        let processes = ProfileEscrowProcesses(
            directory: cli.directory.path,
            environment: [
                "PROFILE_ESCROW_DATABASE": cli.database, "PROFILE_ESCROW_KEYRING": cli.keyring,
                "PROFILE_ESCROW_BACKEND_URL": "http://127.0.0.1:9/",
                "PROFILE_ESCROW_WEBHOOK_SECRET": "whsec_" + Data(repeating: 7, count: 32).base64EncodedString(),
            ]
        )
        defer { processes.killAll() }
        let replay = try processes.start("replay", ["replay"])
        var seen: [Int] = []
        try await eventually("replay's threads to be batch", within: 30, every: .milliseconds(50)) {
            #expect(replay.isRunning, "replay exited: \(processes.logs.map(ProfileEscrowCLI.text(atPath:)))")
            guard replay.isRunning else { return true }
            seen = Self.threadPolicies(replay.processIdentifier)
            return seen.count >= 2 && seen.allSatisfy { $0 == Self.batch }
        }
        #expect(seen.allSatisfy { $0 == Self.batch })
    }

    /// The scheduling policy of each thread of `pid` (field 41 of its `stat`; the command name, field 2, may hold
    /// spaces and parentheses, so fields are counted from its closing parenthesis).
    static func threadPolicies(_ pid: Int32) -> [Int] {
        threads(pid).map(\.policy)
    }

    /// Each thread's name and scheduling policy.
    static func threads(_ pid: Int32) -> [(name: String, policy: Int)] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.compactMap { task in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8),
                let start = stat.firstIndex(of: "("), let end = stat.lastIndex(of: ")")
            else { return nil }
            let fields = stat[stat.index(after: end)...].split(separator: " ")
            guard fields.count > 38, let policy = Int(fields[38]) else { return nil }
            return (String(stat[stat.index(after: start)..<end]), policy)
        }
    }
}
