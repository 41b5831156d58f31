public import Foundation

/// Runs the real `profile-escrow` binary, built beside the test bundle, as an operator would.
public enum ProfileEscrowCLI {
    public struct Result: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
    }

    /// Where SwiftPM put the binary: tests run from `.build/<configuration>/`, the CLI is built beside them.
    public static var binary: URL {
        let bundle = Bundle.main.bundleURL
        let candidates = [
            bundle.appendingPathComponent("profile-escrow"),
            bundle.deletingLastPathComponent().appendingPathComponent("profile-escrow"),
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
                .appendingPathComponent("profile-escrow"),
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[0]
    }

    /// Runs one command to completion (of `executable`, the CLI by default). The `PROFILE_ESCROW_*` variables of the test process are not passed
    /// on; `environment` sets the ones the command should see.
    public static func run(
        _ arguments: [String],
        stdin: String = "",
        environment: [String: String] = [:],
        executable: String? = nil,
        in directory: String
    ) throws -> Result {
        let process = Process()
        process.executableURL = executable.map { URL(fileURLWithPath: $0) } ?? binary
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PROFILE_ESCROW_") }
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let input = Pipe()
        let output = Pipe()
        let error = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = error
        try process.run()
        // Read standard error on another thread, so a child that fills one pipe never blocks on it.
        let errorData = ErrorCollector()
        let finished = DispatchSemaphore(value: 0)
        Thread {
            errorData.set(error.fileHandleForReading.readDataToEndOfFile())
            finished.signal()
        }.start()
        input.fileHandleForWriting.write(Data(stdin.utf8))
        try input.fileHandleForWriting.close()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        finished.wait()
        return Result(
            status: process.terminationStatus,
            stdout: String(decoding: out, as: UTF8.self),
            stderr: String(decoding: errorData.get(), as: UTF8.self)
        )
    }

    /// Written by the reader thread, read after it signalled: the lock makes that visible to TSAN too.
    private final class ErrorCollector: @unchecked Sendable {
        private let lock = NSLock()
        private var data = Data()

        func set(_ value: Data) { lock.withLock { data = value } }
        func get() -> Data { lock.withLock { data } }
    }
}
