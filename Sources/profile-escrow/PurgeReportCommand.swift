import ArgumentParser
import EscrowCore
import EscrowHTTP
import Foundation
import ProfileEscrow

struct PurgeReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "purge-report",
        abstract: "What was kept, for how long, and why it was purged; exits 1 on a broken chain or overdue escrow."
    )
    @OptionGroup var options: GlobalOptions
    @Option(help: "Start of the period: an ISO-8601 time, or an age such as 7d.") var since: String?
    @Option(help: "End of the period: an ISO-8601 time, or an age such as 1h.") var until: String?
    @Option(help: "text, json, csv (a `# ` summary block, then one row per purge) or html (a document for an auditor).")
    var format: Format = .text
    @Flag(
        help: """
            Recompute the audit hash chain and name the first broken link. After an archive cut, the store's chain is             verified from its checkpoint (and the segments given with --archive too).
            """
    )
    var verify = false
    @Option(
        name: .customLong("archive"),
        parsing: .upToNextOption,
        help: """
            Segment files written by `audit archive`, for a period that reaches before the store's checkpoint;             without them, the report names the archived period it cannot count.
            """
    )
    var archives: [String] = []

    enum Format: String, ExpressibleByArgument { case text, json, csv, html }

    static func parseTime(_ text: String, now: Date) -> Date? {
        if let seconds = DurationParser.seconds(text) { return now.addingTimeInterval(-seconds) }
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withFullDate]
        return formatter.date(from: text)
    }

    func validate() throws {
        let now = Date()
        if let since, Self.parseTime(since, now: now) == nil {
            throw ValidationError("--since: '\(since)' is not an ISO-8601 time or an age such as 7d")
        }
        if let until, Self.parseTime(until, now: now) == nil {
            throw ValidationError("--until: '\(until)' is not an ISO-8601 time or an age such as 1h")
        }
        if let since, let until, let start = Self.parseTime(since, now: now), let end = Self.parseTime(until, now: now),
            start > end
        {
            throw ValidationError(
                "--since (\(Timestamp.seconds(start))) is after --until (\(Timestamp.seconds(end))): "
                    + "an age counts back from now, so --since 2h --until 1h is the hour before the last"
            )
        }
    }

    func run() async throws {
        let now = Date()
        // Read-only: no keyring needed, works beside a running writer.
        let store = try await options.openStore(readOnly: true, owner: "profile-escrow purge-report")
        let start = since.flatMap { Self.parseTime($0, now: now) }
        // Events after `now` wait for the next report, so the CSV's summary and rows count the same events.
        let end = until.flatMap { Self.parseTime($0, now: now) } ?? now
        let report = try await PurgeReport.build(
            store: store,
            since: start,
            until: end,
            verify: verify,
            archives: archives,
            retentionSeconds: options.escrowConfiguration.retention,
            now: now
        )
        if let plain = OperatorActions.ReportFormat(rawValue: format.rawValue) {
            try await report.write(plain, rowsFrom: store, archives: archives) { print($0, terminator: "") }
            if plain == .json { print() }
        } else {
            print(try report.html(), terminator: "")
        }
        if report.hasProblem {
            if format != .text {
                let reason =
                    report.chain.map { !$0.verified } ?? false
                    ? "audit chain broken"
                    : !(report.archive?.problems.isEmpty ?? true)
                        ? "archived segments do not verify" : "overdue escrows"
                FileHandle.standardError.write(Data("problem: \(reason)\n".utf8))
            }
            throw ExitCode(CLIFailure.problem)
        }
    }
}
