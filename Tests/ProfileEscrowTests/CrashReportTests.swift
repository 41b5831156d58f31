import EscrowTestSupport
import Foundation
import Testing

/// A crash prints one fixed line, never the Swift runtime's backtrace with registers and memory.
@Suite("Crash reports")
struct CrashReportTests {
    @Test(
        "a deliberate crash prints no registers or memory, even with the backtracer asked for",
        arguments: [("trap", Int32(128 + 4)), ("segv", Int32(128 + 11)), ("abort", Int32(128 + 6))]
    )
    func noMemoryInCrashReport(kind: String, status: Int32) async throws {
        let directory = TemporaryDirectory()
        // The runtime's backtracer reads this at start: on, it would print registers and memory.
        let result = try await ProfileEscrowCLI.run(
            ["crash-check", kind],
            environment: ["SWIFT_BACKTRACE": "enable=yes,interactive=no"],
            in: directory.path
        )
        #expect(result.status == status, "exit \(result.status)")
        #expect(result.stderr.contains("profile-escrow: fatal signal; exiting without a crash report"))
        for marker in ["Registers", "rax ", "rip ", "Backtrace", "Thread 0", "Program crashed", "0x0000"] {
            #expect(!result.stderr.contains(marker), "stderr shows \(marker)")
        }
    }
}
