public import AsyncHTTPClient
public import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

#if canImport(Glibc)
import Glibc
#endif

/// Long-running `profile-escrow` processes of one test (`serve`, `replay`), by name, each writing its output to a
/// file of its own in `directory` (a process started again under the same name, to a new file). Output goes to files,
/// not pipes, for the reasons ``ProfileEscrowCLI/run(_:stdin:environment:executable:in:)`` gives.
public final class ProfileEscrowProcesses: Sendable {
    private let running = NIOLockedValueBox([String: ChildProcess]())
    private let written = NIOLockedValueBox([String]())
    public let directory: String
    public let environment: [String: String]

    /// `environment` sets the `PROFILE_ESCROW_*` variables the processes see; the test process's own are not passed
    /// on.
    public init(directory: String, environment: [String: String]) {
        self.directory = directory
        self.environment = environment
    }

    /// Every output file so far, in start order.
    public var logs: [String] { written.withLockedValue { $0 } }

    /// Starts `profile-escrow <arguments>` under `name`, writing to `<directory>/<name>-<n>.log`; through `launcher`
    /// when given (a command and its arguments, such as `["/usr/bin/chrt", "--idle", "0"]`, that runs the rest).
    @discardableResult
    public func start(_ name: String, _ arguments: [String], launcher: [String] = []) throws -> ChildProcess {
        let process = ChildProcess()
        if let command = launcher.first {
            process.executableURL = URL(fileURLWithPath: command)
            process.arguments = launcher.dropFirst() + [ProfileEscrowCLI.binary.path] + arguments
        } else {
            process.executableURL = ProfileEscrowCLI.binary
            process.arguments = arguments
        }
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PROFILE_ESCROW_") }
            .merging(environment) { $1 }
        let log = directory + "/\(name)-\(logs.count).log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let output = FileHandle(forWritingAtPath: log)
        process.standardOutput = output
        process.standardError = output
        try process.run()
        written.withLockedValue { $0.append(log) }
        running.withLockedValue { $0[name] = process }
        return process
    }

    /// Starts `serve --no-worker` under `name` on 127.0.0.1:`port`, its rate limit out of the way (the tests send
    /// hundreds of captures at once); ``waitUntilHealthy(_:port:within:)`` waits for it.
    @discardableResult
    public func startCaptureNode(_ name: String, port: Int, launcher: [String] = []) throws -> ChildProcess {
        try start(
            name,
            [
                "serve", "--no-worker", "--host", "127.0.0.1", "--port", "\(port)", "--rate-limit", "100000",
                "--rate-burst", "100000",
            ],
            launcher: launcher
        )
    }

    /// Starts `serve --no-worker` under `name` on a free port and waits until `/healthz` answers; returns the port.
    /// A node that exits before it is healthy (another process took the port between ``freePort()`` and its bind, as
    /// an outgoing connection of a test running in parallel can) is started again on another port, at most three
    /// times; then this throws with the end of its log.
    public func startHealthyCaptureNode(
        _ name: String,
        client: HTTPClient,
        launcher: [String] = []
    ) async throws -> Int {
        var lastLog = ""
        for _ in 0..<3 {
            let port = try freePort()
            let process = try startCaptureNode(name, port: port, launcher: launcher)
            do {
                try await eventually("serve on port \(port) to be healthy", within: 60, every: .milliseconds(100)) {
                    guard process.isRunning else { throw ExitedEarly() }
                    let response = try? await client.execute(
                        HTTPClientRequest(url: "http://127.0.0.1:\(port)/healthz"),
                        timeout: .seconds(1)
                    )
                    return response?.status == .ok
                }
                return port
            } catch is ExitedEarly {
                process.waitUntilExit()
                let how = process.terminationReason == .uncaughtSignal ? "killed by signal" : "exited with status"
                lastLog =
                    "\(how) \(process.terminationStatus); "
                    + (logs.last.map { String(ProfileEscrowCLI.text(atPath: $0).suffix(20_000)) } ?? "")
            }
        }
        throw TimedOut(what: "serve to start (it exited three times; its last log ends: \(lastLog))")
    }

    private struct ExitedEarly: Error {}

    /// The process started as `name` and not yet signalled or stopped.
    public func process(_ name: String) -> ChildProcess? {
        running.withLockedValue { $0[name] }
    }

    /// Sends `signal` (SIGKILL by default) to the process started as `name` and waits for its end; returns it.
    @discardableResult
    public func signal(_ name: String, _ signal: Int32 = SIGKILL) -> ChildProcess? {
        guard let process = running.withLockedValue({ $0.removeValue(forKey: name) }) else { return nil }
        if process.isRunning { kill(process.processIdentifier, signal) }
        process.waitUntilExit()
        return process
    }

    /// SIGTERM to every process still running, then waits for their ends.
    public func stopAll() {
        let all = takeAll()
        for process in all where process.isRunning { kill(process.processIdentifier, SIGTERM) }
        for process in all { process.waitUntilExit() }
    }

    /// SIGKILL to every process still running (for a test's `defer`: nothing is left behind).
    public func killAll() {
        for process in takeAll() where process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    private func takeAll() -> [ChildProcess] {
        running.withLockedValue { running in
            defer { running = [:] }
            return Array(running.values)
        }
    }
}
