import Foundation

/// The fault shim of `scripts/faults/faultshim.c`, built with `cc` on first use: a disk that loses power (every write
/// not yet synced is lost, names included: a rename is durable once its folder is synced) and that fails writes and
/// fsyncs on demand, for processes run with ``environment(cutAt:fail:)``. See the C file for the model.
public struct FaultShim: Sendable {
    /// The shared object to preload.
    public let library: String
    /// `faulttool`: `snapshot` (the disk made equal to the folder) and `restore` (the folder made equal to the disk).
    public let tool: String
    /// The folder watched: its regular files and the folder itself.
    public let directory: String
    /// Where the disk's view is kept.
    public let shadow: String

    public struct BuildFailed: Error, CustomStringConvertible {
        public var description: String
    }

    /// Builds the shim into `scratch` and watches `directory` (absolute), keeping the disk's view in
    /// `<scratch>/shadow`.
    public init(directory: String, scratch: String) async throws {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/faults/faultshim.c").path
        library = scratch + "/faultshim.so"
        tool = scratch + "/faulttool"
        self.directory = directory
        shadow = scratch + "/shadow"
        try await Self.compile(["-O1", "-shared", "-fPIC", "-o", library, source, "-ldl"])
        try await Self.compile(["-O1", "-DFAULT_TOOL", "-o", tool, source])
    }

    /// Debian's `cc` (`gcc`, installed by scripts/setup.sh --tests), else the Swift toolchain's `clang`.
    static var compiler: String {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        let candidates = ["/usr/bin/cc"] + path.map { $0 + "/clang" }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/bin/cc"
    }

    private static func compile(_ arguments: [String]) async throws {
        let result = try await ProfileEscrowCLI.run(arguments, executable: compiler, in: "/")
        guard result.status == 0 else { throw BuildFailed(description: "cc \(arguments): \(result.stderr)") }
    }

    /// The environment of a process on this disk: the power goes off at the `cutAt`th sync (counted over every
    /// process since the last ``snapshot()``), and `fail` (`op:part:n:errno[:count]`) fails some calls.
    public func environment(cutAt: Int? = nil, fail: String? = nil) -> [String: String] {
        var environment = ["LD_PRELOAD": library, "FAULT_DIR": directory, "FAULT_SHADOW": shadow]
        if let cutAt { environment["FAULT_CUT_AT"] = "\(cutAt)" }
        if let fail { environment["FAULT_FAIL"] = fail }
        return environment
    }

    /// The disk made equal to the folder as it is now (everything on it synced); the sync count starts again.
    public func snapshot() async throws {
        try? FileManager.default.removeItem(atPath: shadow)
        try await run("snapshot")
    }

    /// The power cut: the folder made equal to what the disk holds.
    public func restore() async throws { try await run("restore") }

    /// The syncs since the last ``snapshot()``, all processes together.
    public var syncCount: Int {
        Int(ProfileEscrowCLI.text(atPath: shadow + "/count").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    /// Whether the power went off.
    public var isCut: Bool { FileManager.default.fileExists(atPath: shadow + "/cut") }

    private func run(_ command: String) async throws {
        let result = try await ProfileEscrowCLI.run([command, directory, shadow], executable: tool, in: "/")
        guard result.status == 0 else { throw BuildFailed(description: "faulttool \(command): \(result.stderr)") }
    }
}
