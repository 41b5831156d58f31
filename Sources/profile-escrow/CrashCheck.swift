import ArgumentParser

#if canImport(Glibc)
import Glibc
#endif

/// `profile-escrow crash-check KIND`: hidden; crashes this process on purpose, after the same start-up
/// hardening as every command, so that a test (or an operator) can see that a crash prints one fixed
/// line and no registers or memory. It reads no store, keyring or input.
struct CrashCheck: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crash-check",
        abstract: "Crash on purpose, to check that a crash prints no memory contents.",
        shouldDisplay: false
    )

    enum Kind: String, ExpressibleByArgument, CaseIterable {
        /// A Swift runtime trap (an integer conversion that does not fit): SIGILL on Linux x86-64.
        case trap
        /// A write through an invalid pointer: SIGSEGV.
        case segv
        /// `abort()`: SIGABRT.
        case abort
    }

    @Argument(help: "trap, segv or abort.") var kind: Kind

    func run() throws {
        switch kind {
        case .trap:
            let big = Int64(ProcessInfoLite.argumentCount) << 40
            print(Int32(big))
        case .segv:
            let pointer = UnsafeMutablePointer<Int>(bitPattern: 0x10)
            pointer?.pointee = ProcessInfoLite.argumentCount
        case .abort:
            Glibc.abort()
        }
    }
}

/// A value the optimizer cannot know, so that a deliberate crash is not folded away at compile time.
enum ProcessInfoLite {
    static var argumentCount: Int { Int(CommandLine.argc) }
}
