import EscrowTestSupport
import Foundation
import Testing

@testable import profile_escrow

/// `serve --help` shows each default as the option takes it, read from the library's configurations.
@Suite("serve's help")
struct ServeHelpTests {
    static let durationCases: [(Double, String)] = [
        (3600, "1h"), (120, "2m"), (60, "1m"), (30, "30s"), (1, "1s"), (0.25, "250ms"), (0, "0s"), (90, "90s"),
        (30 * 86_400, "30d"), (600, "10m"),
    ]

    @Test("durations in the largest whole unit", arguments: durationCases)
    func durations(seconds: Double, text: String) {
        #expect(DefaultText.duration(seconds) == text)
        #expect(DefaultText.duration(.milliseconds(Int64(seconds * 1000))) == text)
    }

    @Test func numbers() {
        #expect(DefaultText.number(100) == "100")
        #expect(DefaultText.number(0.5) == "0.5")
    }

    @Test("the defaults an operator reads in serve --help are the documented ones")
    func defaultsShown() async throws {
        let directory = TemporaryDirectory()
        let help = try await ProfileEscrowCLI.run(["serve", "--help"], in: directory.path)
        #expect(help.status == 0)
        // Help wraps its lines: compare with the white space folded.
        let text = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for (variable, shown) in [
            ("PORT", "8080"), ("RATE_LIMIT", "100"), ("RATE_BURST", "200"), ("ANONYMOUS_RATE_LIMIT", "10"),
            ("ANONYMOUS_OVERALL_RATE_LIMIT", "500"), ("DRAIN_DELAY", "0s"), ("CONCURRENCY", "4"),
            ("MAX_ATTEMPTS", "50"), ("BACKOFF_BASE", "1s"), ("BACKOFF_MAX", "1h"), ("LEASE", "2m"),
            ("DELIVERY_TIMEOUT", "30s"), ("CONFIRM_TIMEOUT", "1h"), ("POLL_INTERVAL", "1s"), ("SWEEP_INTERVAL", "1m"),
            ("RETENTION", "30d"), ("STORE_TIMEOUT", "5"), ("SCHEDULING", "batch"),
        ] {
            #expect(text.contains("PROFILE_ESCROW_\(variable); default \(shown)"), "\(variable): \(shown)")
        }
        #expect(text.contains("How long a sign-in attempt lives (default 10m)"))
        #expect(text.contains("(default https://appleid.apple.com/auth/authorize)"))
        #expect(text.contains("default https://appleid.apple.com/auth/keys"))
    }
}
