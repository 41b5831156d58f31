public import Foundation
import Glibc
import NIOConcurrencyHelpers

/// A child process for the tests, started with `posix_spawn` directly: the subset of Foundation's `Process` the tests
/// use, under the same names.
///
/// Written by hand because swift-corelibs-foundation's `Process.run()` crashed the whole test process in full runs
/// (a `memcpy` past mapped memory inside it, three times, even with starts serialized): on Linux it adds one close
/// action for every descriptor number from 3 to the highest open one, read while other tests' threads open and close
/// theirs, and a test process holds over a thousand. Here the child closes every descriptor above 2 with one action
/// (`posix_spawn_file_actions_addclosefrom_np`, glibc 2.34), so nothing of the test process leaks into it (a pipe's
/// write end inherited by another child would hide its end of file). swift-subprocess scopes a child to a closure,
/// which the tests' long-lived nodes do not fit.
///
/// Configure it, then ``run()``; the state after it is read under a lock from any thread. Like `Process`, a standard
/// stream left nil is `/dev/null`, and the child runs in a process group of its own.
public final class ChildProcess: @unchecked Sendable {
    public var executableURL: URL?
    public var arguments: [String] = []
    /// Nil: the test process's environment.
    public var environment: [String: String]?
    public var currentDirectoryURL: URL?
    /// A `FileHandle` or a `Pipe` (its read end becomes the child's standard input); nil for `/dev/null`.
    public var standardInput: Any?
    /// A `FileHandle` or a `Pipe` (its write end becomes the child's); nil for `/dev/null`.
    public var standardOutput: Any?
    public var standardError: Any?

    private struct State {
        var pid: pid_t = 0
        /// The raw status `waitpid` gave, once the child was reaped.
        var status: Int32?
    }

    private let state = NIOLockedValueBox(State())

    public init() {}

    public var processIdentifier: Int32 { state.withLockedValue { $0.pid } }

    /// Whether the child was started and has not exited (reaping it when it has).
    public var isRunning: Bool {
        state.withLockedValue { state in
            guard state.pid > 0, state.status == nil else { return false }
            var status: Int32 = 0
            let reaped = waitpid(state.pid, &status, WNOHANG)
            if reaped == state.pid { state.status = status }
            return reaped == 0 || (reaped == -1 && errno == EINTR)
        }
    }

    /// Waits for the child to exit (polling every 5 ms, as `Process` polls its run loop), blocking the thread: for
    /// synchronous code only. An async test awaits ``exited()``: a blocked thread is one of the few of Swift's
    /// cooperative pool, and a long child on each stalls every other test of the process meanwhile.
    public func waitUntilExit() {
        while isRunning { usleep(5_000) }
    }

    /// Waits for the child to exit (polling every 5 ms) without holding a thread.
    public func exited() async {
        while isRunning { try? await Task.sleep(for: .milliseconds(5)) }
    }

    /// The exit code, or the signal that ended the child.
    public var terminationStatus: Int32 {
        let status = finishedStatus()
        return Self.signalled(status) ? status & 0x7f : (status >> 8) & 0xff
    }

    public var terminationReason: Process.TerminationReason {
        Self.signalled(finishedStatus()) ? .uncaughtSignal : .exit
    }

    public func terminate() { signal(SIGTERM) }

    public func interrupt() { signal(SIGINT) }

    private func signal(_ number: Int32) {
        let pid = processIdentifier
        precondition(pid > 0, "the child was not started")
        if isRunning { kill(pid, number) }
    }

    private func finishedStatus() -> Int32 {
        guard let status = state.withLockedValue({ $0.status }) else {
            preconditionFailure("the child is still running (or was not started)")
        }
        return status
    }

    private static func signalled(_ status: Int32) -> Bool {
        let signal = status & 0x7f
        return signal != 0 && signal != 0x7f
    }

    public func run() throws {
        guard let path = executableURL?.path else { throw CocoaError(.fileNoSuchFile) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let devNull = open("/dev/null", O_RDWR | O_CLOEXEC)
        guard devNull >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        defer { close(devNull) }
        let streams = [
            Self.descriptor(standardInput, reading: true) ?? devNull,
            Self.descriptor(standardOutput, reading: false) ?? devNull,
            Self.descriptor(standardError, reading: false) ?? devNull,
        ]
        for (target, source) in streams.enumerated() {
            try Self.check(posix_spawn_file_actions_adddup2(&actions, source, Int32(target)))
        }
        try Self.check(Self.addCloseFrom(&actions, 3))
        if let directory = currentDirectoryURL?.path {
            try Self.check(directory.withCString { Self.addChdir(&actions, $0) })
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        try Self.check(posix_spawnattr_setpgroup(&attributes, 0))
        try Self.check(posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP)))

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let environment = environment ?? ProcessInfo.processInfo.environment
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        try Self.check(posix_spawn(&pid, path, &actions, &attributes, argv, envp))
        state.withLockedValue { $0.pid = pid }
        // The child's ends of pipes are the child's alone now, as `Process` leaves them.
        (standardInput as? Pipe)?.fileHandleForReading.closeFile()
        (standardOutput as? Pipe)?.fileHandleForWriting.closeFile()
        (standardError as? Pipe)?.fileHandleForWriting.closeFile()
    }

    private static func descriptor(_ stream: Any?, reading: Bool) -> Int32? {
        switch stream {
        case let pipe as Pipe:
            reading ? pipe.fileHandleForReading.fileDescriptor : pipe.fileHandleForWriting.fileDescriptor
        case let handle as FileHandle: handle.fileDescriptor
        default: nil
        }
    }

    private static func check(_ result: Int32) throws {
        guard result == 0 else { throw POSIXError(.init(rawValue: result) ?? .EIO) }
    }

    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private typealias Chdir =
        @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32

    /// glibc's GNU extensions, which its Swift module does not declare: looked up once by name.
    private static let addCloseFrom: CloseFrom = unsafeBitCast(
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")!,
        to: CloseFrom.self
    )
    private static let addChdir: Chdir = unsafeBitCast(
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addchdir_np")!,
        to: Chdir.self
    )
}
