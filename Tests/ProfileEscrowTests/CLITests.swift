import EscrowCrypto
import EscrowTestSupport
import Foundation
import Glibc
import Testing

/// The `profile-escrow` binary, run as an operator would: real files, real exit codes.
@Suite("CLI")
struct CLITests {
    typealias Result = ProfileEscrowCLI.Result

    static var binary: URL { ProfileEscrowCLI.binary }

    let directory = TemporaryDirectory()
    var database: String { directory.path + "/escrow.sqlite" }
    var keyring: String { directory.path + "/keyring" }

    func run(_ arguments: [String], stdin: String = "", environment: [String: String] = [:]) async throws -> Result {
        let base = ["PROFILE_ESCROW_DATABASE": database, "PROFILE_ESCROW_KEYRING": keyring]
        return try await ProfileEscrowCLI.run(
            arguments,
            stdin: stdin,
            environment: base.merging(environment) { $1 },
            in: directory.path
        )
    }

    static func body(_ number: Int, email: String? = nil) -> String {
        """
        {"userIdentifier":"000000.canaryuid\(String(format: "%023d", number)).0001",
         "fullName":{"givenName":"CANARYGIVEN\(number)","familyName":"CANARYFAMILY\(number)"},
         "email":"\(email ?? "canarymail\(number)@example.invalid")","realUserStatus":"likelyReal"}
        """
    }

    static func user(_ number: Int) -> String { "000000.canaryuid\(String(format: "%023d", number)).0001" }

    @Test func captureConfirmReportEndToEnd() async throws {
        #expect(try await run(["keys", "init"]).status == 0)
        let capture = try await run(["capture"], stdin: Self.body(1))
        #expect(capture.status == 0, "\(capture.stderr)")
        #expect(EscrowID(hex: capture.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) != nil)
        // umask 077: what the CLI creates is owner-only (the -wal and -shm are gone after the last close).
        for path in [database, keyring, database + ".write-lock"] {
            let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(mode.map { $0 & 0o077 } == 0, "\(path) is accessible by others")
        }
        let status = try await run(["status", Self.user(1), "--format", "json"])
        #expect(status.status == 0)
        #expect(status.stdout.contains("\"state\" : \"pending\""))
        // The HTTP shape: numbers as numbers, null as null, RFC 3339 times with milliseconds.
        let metadata = try #require(
            try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
        )
        #expect(metadata["attempts"] as? Int == 0)
        #expect(metadata["keyVersion"] as? Int == 1)
        #expect(metadata["deadCode"] is NSNull && metadata["lastStatus"] is NSNull)
        #expect((metadata["createdAt"] as? String)?.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil)
        #expect(Set(metadata.keys).isSuperset(of: ["escrowId", "state", "nextAttemptAt", "expiresAt"]))
        #expect(try await run(["confirm", Self.user(1)]).status == 0)
        #expect(try await run(["confirm", Self.user(1)]).status == 3, "nothing held any more")
        #expect(try await run(["status", Self.user(1)]).status == 3)
        let report = try await run(["purge-report", "--verify", "--format", "json"])
        #expect(report.status == 0, "\(report.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(report.stdout.utf8)) as? [String: Any])
        #expect((json["purged"] as? [String: Int])?["confirmed"] == 1)
        #expect((json["chain"] as? [String: Any])?["verified"] as? Bool == true)
        let csv = try await run(["purge-report", "--format", "csv"])
        #expect(csv.stdout.split(separator: "\n").filter { !$0.hasPrefix("# ") }.count == 2)  // header + 1 purge
        for result in [capture, status, report, csv] {
            for token in ["CANARYGIVEN", "CANARYFAMILY", "canarymail", "canaryuid"] {
                #expect(!result.stdout.contains(token) && !result.stderr.contains(token))
            }
        }
    }

    @Test func exitCodes() async throws {
        // No keyring at an explicit path: store or keyring unavailable.
        let missing = try await run(["capture"], stdin: Self.body(1))
        #expect(missing.status == 4)
        #expect(missing.stderr.contains("keyring"))
        #expect(try await run(["keys", "init"]).status == 0)
        #expect(try await run(["keys", "init"]).status != 0, "init refuses to overwrite")
        // Bad input: exit 2, the offending value never echoed, nothing stored.
        for body in [
            "{", #"{"userIdentifier":"x"}"#, Self.body(2, email: "canarymail@@example.invalid"),
            #"{"userIdentifier":"000000.a.1","email":"a@example.invalid","canaryField":1}"#,
            String(repeating: "x", count: 20_000),
            // A code needs a verified capture, which the command line does not make.
            #"{"userIdentifier":"000000.a.1","email":"a@example.invalid","authorizationCode":"c.canarycode"}"#,
        ] {
            let result = try await run(["capture"], stdin: body)
            #expect(result.status == 2, "\(result.stderr)")
            #expect(!result.stderr.contains("canarymail") && !result.stderr.contains("canarycode"))
        }
        #expect(try await run(["confirm", "not a valid id"]).status == 2)
        #expect(try await run(["requeue"]).status == 2)
        #expect(try await run(["purge-report", "--since", "yesterday-ish"]).status == 2)
        #expect(try await run(["no-such-command"]).status == 2)
        #expect(try await run(["erase", Self.user(5)]).status == 3)
        let report = try await run(["purge-report", "--format", "json"])
        #expect(report.stdout.contains("\"captured\" : 0"))
        // A world-readable keyring is refused.
        chmod(keyring, 0o644)
        let loose = try await run(["capture"], stdin: Self.body(1))
        #expect(loose.status == 4)
        #expect(loose.stderr.contains("chmod"))
    }

    @Test func purgeReportVerifyExitsOneOnABrokenChain() async throws {
        #expect(try await run(["keys", "init"]).status == 0)
        for number in 0..<3 { #expect(try await run(["capture"], stdin: Self.body(number)).status == 0) }
        #expect(try await run(["purge-report", "--verify"]).status == 0)
        let sqlite = ChildProcess()
        sqlite.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        sqlite.arguments = [
            "python3", "-c",
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); "
                + "c.execute(\"UPDATE audit_event SET actor='library' WHERE seq=2\"); c.commit()", database,
        ]
        try sqlite.run()
        await sqlite.exited()
        #expect(sqlite.terminationStatus == 0)
        let broken = try await run(["purge-report", "--verify"])
        #expect(broken.status == 1)
        #expect(broken.stdout.contains("BROKEN at sequence 2"))
    }

    @Test func aSecondWriterProcessIsRefusedWhileReadersWork() async throws {
        #expect(try await run(["keys", "init"]).status == 0)
        #expect(try await run(["capture"], stdin: Self.body(1)).status == 0)
        // Another process holds the store's write lock for a second, as a long write transaction would.
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c",
            // The lock is held for a second of real time: the writer waiting for it is a real process.
            "import fcntl,sys,time; f=open(sys.argv[1],'a+'); fcntl.flock(f, fcntl.LOCK_EX); "
                + "print('locked', flush=True); time.sleep(1)", database + ".write-lock",
        ]
        let ready = Pipe()
        process.standardOutput = ready
        try process.run()
        defer { process.terminate() }
        _ = ready.fileHandleForReading.availableData
        #expect(try await run(["status", Self.user(1)]).status == 0, "read-only commands do not wait")
        let started = Date()
        let second = try await run(["capture"], stdin: Self.body(2))
        #expect(second.status == 0, "\(second.stderr)")
        #expect(Date().timeIntervalSince(started) > 0.3, "the capture waited for the other writer")
        #expect(try await run(["status", Self.user(2)]).status == 0, "and then stored its escrow")
        #expect(try await run(["purge-report", "--verify"]).status == 0)
    }

    /// `purge-report` on a store in a folder this user cannot write, with no `-wal` or `-shm` beside it (a
    /// backup, a read-only mount): it opens and reads. As root (CI), the report runs as `nobody`, for whom
    /// the folder is read-only; otherwise the folder is made read-only.
    @Test func readOnlyCommandsWorkInAReadOnlyFolder() async throws {
        #expect(try await run(["keys", "init"]).status == 0)
        #expect(try await run(["capture"], stdin: Self.body(1)).status == 0)
        #expect(try await run(["confirm", Self.user(1)]).status == 0)
        #expect(try await run(["capture"], stdin: Self.body(2)).status == 0)
        let folder = directory.path + "/readonly"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        try FileManager.default.copyItem(atPath: database, toPath: folder + "/escrow.sqlite")
        #expect(!FileManager.default.fileExists(atPath: folder + "/escrow.sqlite-wal"))
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: folder + "/escrow.sqlite")
        try FileManager.default.setAttributes([.posixPermissions: 0o555], ofItemAtPath: folder)
        defer { try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder) }
        let arguments = ["purge-report", "--verify", "--format", "json", "--database", folder + "/escrow.sqlite"]
        let report: Result
        if getuid() == 0 {
            report = try await ProfileEscrowCLI.run(
                ["-u", "nobody", "--", Self.binary.path] + arguments,
                executable: "/usr/sbin/runuser",
                in: "/"
            )
        } else {
            report = try await run(arguments)
        }
        #expect(report.status == 0, "\(report.stderr)")
        #expect(report.stdout.contains("\"confirmed\" : 1") || report.stdout.contains("\"confirmed\":1"))
        #expect(!FileManager.default.fileExists(atPath: folder + "/escrow.sqlite-wal"), "nothing was created")
    }

    /// An operator's commands: keys cycle beside the data, inspect and list, status given an escrow id.
    @Test func operatorCommands() async throws {
        #expect(try await run(["keys", "init"]).status == 0)
        var ids: [String] = []
        for number in 1...3 {
            let capture = try await run(["capture"], stdin: Self.body(number))
            #expect(capture.status == 0, "\(capture.stderr)")
            ids.append(capture.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        #expect(try await run(["confirm", Self.user(1)]).status == 0)

        let cycle = try await run(["keys", "cycle", "--grace", "0s"])
        #expect(cycle.status == 0, "\(cycle.stderr)")
        #expect(cycle.stdout.contains("active version 2; rewrapped 2, 0 failed; retired v1"))
        let show = try await run(["keys", "show"])
        #expect(show.stdout.contains("v1") && show.stdout.contains("retired") && show.stdout.contains("v2"))
        #expect(try await run(["status", Self.user(2)]).status == 0, "still opens after the cycle (blind index unchanged)")

        let purged = try await run(["inspect", ids[0], "--format", "json"])
        #expect(purged.status == 0, "\(purged.stderr)")
        let history = try #require(try JSONSerialization.jsonObject(with: Data(purged.stdout.utf8)) as? [String: Any])
        #expect(history["status"] is NSNull)
        let types = (history["events"] as? [[String: Any]])?.compactMap { $0["type"] as? String }
        #expect(types == ["captured", "purged"])
        let live = try await run(["inspect", ids[1]])
        #expect(live.status == 0 && live.stdout.contains("pending") && live.stdout.contains("captured"))
        for result in [purged, live] {
            for token in ["CANARYGIVEN", "CANARYFAMILY", "canarymail", "canaryuid"] {
                #expect(!result.stdout.contains(token))
            }
        }
        #expect(try await run(["inspect", String(repeating: "0", count: 32)]).status == 3)
        #expect(try await run(["inspect", "not-an-id"]).status == 2)

        let asUser = try await run(["status", ids[1]])
        #expect(asUser.status == 3 && asUser.stderr.contains("inspect \(ids[1])"))

        let list = try await run(["list", "--state", "pending", "--format", "json"])
        #expect(list.status == 0, "\(list.stderr)")
        let listed = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
        #expect(listed.compactMap { $0["escrowId"] as? String } == [ids[1], ids[2]], "oldest first")
        #expect(try await run(["list", "--state", "purged"]).status == 2)
    }

    /// A crash report must not print memory: every command replaces Swift's runtime backtracer with its own crash
    /// handlers at start (whatever `SWIFT_BACKTRACE` it was given), so a fatal signal ends it without registers or
    /// memory on stderr.
    @Test func aCrashPrintsNoMemory() async throws {
        #expect(try await run(["keys", "init"]).status == 0)
        let process = ChildProcess()
        process.executableURL = Self.binary
        process.arguments = ["serve", "--no-worker", "--port", "0"]
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PROFILE_ESCROW_") }
        environment["PROFILE_ESCROW_DATABASE"] = database
        environment["PROFILE_ESCROW_KEYRING"] = keyring
        environment["SWIFT_BACKTRACE"] = "enable=yes,interactive=no"
        process.environment = environment
        let log = directory.path + "/serve.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.standardOutput = FileHandle(forWritingAtPath: log)
        process.standardError = FileHandle(forWritingAtPath: log)
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        // Not required: a `serve` that ended or never started fails the expectations below.
        try? await eventually("serve to start", within: 60, every: .milliseconds(50)) {
            ProfileEscrowCLI.text(atPath: log).contains("Server started") || !process.isRunning
        }
        // A fatal signal in a running `serve`: the crash handler's one fixed line and 128 + signal, nothing else.
        kill(process.processIdentifier, SIGSEGV)
        await process.exited()
        let served = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(process.terminationReason == .exit && process.terminationStatus == 128 + SIGSEGV)
        #expect(served.contains("profile-escrow: fatal signal; exiting without a crash report"))
        for marker in ["Program crashed", "Registers", "Backtrace", "rax 0x", "Thread 0"] {
            #expect(!served.contains(marker), "serve's crash printed \(marker)")
        }

        // A real crash (a trap inside the process, after the hardening): no registers, no memory, no backtrace.
        let crash = try await ProfileEscrowCLI.run(
            ["status", Self.user(1)],
            environment: [
                "PROFILE_ESCROW_DATABASE": database, "PROFILE_ESCROW_KEYRING": keyring,
                "PROFILE_ESCROW_TEST_CRASH": "1", "SWIFT_BACKTRACE": "enable=yes,interactive=no",
            ],
            in: directory.path
        )
        #expect(crash.status != 0 && crash.stderr.contains("a crash on purpose"))
        for marker in ["Program crashed", "Registers", "Backtrace", "rax 0x", "Thread 0"] {
            #expect(!crash.stderr.contains(marker), "the crash printed \(marker)")
        }
    }
}
