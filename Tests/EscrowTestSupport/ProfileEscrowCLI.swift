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
    ) async throws -> Result {
        let process = ChildProcess()
        process.executableURL = executable.map { URL(fileURLWithPath: $0) } ?? binary
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PROFILE_ESCROW_") }
        for (key, value) in environment { env[key] = value }
        process.environment = env
        // Standard input, output and error go through files, not pipes: no reader thread, no pipe that a child
        // could fill and block on, and none of Foundation's pipe reading (which once trapped here under load).
        let scratch = FileManager.default.temporaryDirectory
            .appendingPathComponent("profile-escrow-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let paths = ["stdin", "stdout", "stderr"].map { scratch.appendingPathComponent($0).path }
        _ = FileManager.default.createFile(atPath: paths[0], contents: Data(stdin.utf8))
        _ = FileManager.default.createFile(atPath: paths[1], contents: nil)
        _ = FileManager.default.createFile(atPath: paths[2], contents: nil)
        let handles = [
            FileHandle(forReadingAtPath: paths[0]), FileHandle(forWritingAtPath: paths[1]),
            FileHandle(forWritingAtPath: paths[2]),
        ]
        guard let input = handles[0], let output = handles[1], let error = handles[2] else {
            throw CocoaError(.fileNoSuchFile)
        }
        defer { for handle in handles { try? handle?.close() } }
        process.standardInput = input
        process.standardOutput = output
        process.standardError = error
        try process.run()
        await process.exited()
        return Result(
            status: process.terminationStatus,
            stdout: String(decoding: contents(atPath: paths[1]), as: UTF8.self),
            stderr: String(decoding: contents(atPath: paths[2]), as: UTF8.self)
        )
    }

    /// Sets up a capture node as an operator would: `keys init`, then `tokens add <token> --scope capture`; returns the
    /// token. Fails naming the command and its standard error when one of them fails.
    public static func setUpCaptureNode(
        token name: String,
        environment: [String: String],
        in directory: String
    ) async throws -> String {
        let initialized = try await run(["keys", "init"], environment: environment, in: directory)
        guard initialized.status == 0 else { throw SetUpFailed(description: "keys init: \(initialized.stderr)") }
        let added = try await run(["tokens", "add", name, "--scope", "capture"], environment: environment, in: directory)
        guard added.status == 0, let token = added.stdout.split(separator: "\n").last else {
            throw SetUpFailed(description: "tokens add: \(added.stderr)")
        }
        return String(token)
    }

    public struct SetUpFailed: Error, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    /// A file's bytes, empty when it is empty or absent. `FileManager.contents(atPath:)` of the Swift 6.3
    /// toolchain leaks a 4 KiB buffer on every read of an empty file (LeakSanitizer reports it), and most
    /// commands write nothing to one of their outputs.
    public static func contents(atPath path: String) -> Data {
        var status = stat()
        guard stat(path, &status) == 0, status.st_size > 0 else { return Data() }
        return FileManager.default.contents(atPath: path) ?? Data()
    }

    /// A file's text (UTF-8), empty when it is empty or absent; see ``contents(atPath:)``.
    public static func text(atPath path: String) -> String {
        String(decoding: contents(atPath: path), as: UTF8.self)
    }
}
