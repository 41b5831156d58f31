import ArgumentParser
import EscrowCrypto
import Foundation
import ProfileEscrow

/// `profile-escrow`: thin over the library. Parse, call, print; the documented exit codes.
@main
struct ProfileEscrowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "profile-escrow",
        abstract: "Keep a Sign in with Apple profile until the backend confirms the registration, then purge it.",
        version: ProfileEscrowVersion.current,
        subcommands: [
            Keys.self, Capture.self, Confirm.self, Erase.self, Status.self, Inspect.self, List.self, Sweep.self,
            Requeue.self, Deliveries.self, Notifications.self,
            PurgeReportCommand.self, Audit.self, Replay.self, Serve.self, Tokens.self, WebhookSecretCommand.self,
            CrashCheck.self, AppleCommand.self,
        ]
    )

    /// Runs the command and maps every failure to a documented exit code: `2` for bad usage
    /// (argument-parser's own errors included, instead of its default 64).
    static func main() async {
        ProcessHardening.disableCoreDumps()
        // No crash report with registers or memory (the Swift runtime's backtracer prints both).
        ProcessHardening.disableCrashReports()
        ProcessHardening.restrictNewFiles()
        // A test hook: a real crash after the hardening, so a test can check what a crash prints.
        if ProcessInfo.processInfo.environment["PROFILE_ESCROW_TEST_CRASH"] == "1" { fatalError("a crash on purpose") }
        do {
            var command = try parseAsRoot(
                GlobalArguments.movedAfterSubcommand(Array(CommandLine.arguments.dropFirst()))
            )
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let exit as ExitCode {
            Foundation.exit(exit.rawValue)
        } catch {
            let code = CLIFailure.exitCode(for: error)
            if code == ExitCode.success.rawValue || error is CleanExit {
                print(fullMessage(for: error))
                Foundation.exit(0)
            }
            FileHandle.standardError.write(Data((CLIFailure.message(for: error) + "\n").utf8))
            Foundation.exit(code)
        }
    }
}
