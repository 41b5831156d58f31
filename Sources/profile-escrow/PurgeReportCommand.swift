import ArgumentParser
import EscrowCore
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
    @Option(help: "text, json or csv.") var format: Format = .text
    @Flag(help: "Recompute the audit hash chain and name the first broken link.") var verify = false

    enum Format: String, ExpressibleByArgument { case text, json, csv }

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
    }

    func run() async throws {
        let now = Date()
        // Read-only: no keyring needed, works beside a running writer.
        let store = try await options.openStore(readOnly: true, owner: "profile-escrow purge-report")
        if format == .csv { print(PurgeReport.csvHeader) }
        let report = try await PurgeReport.build(
            store: store,
            since: since.flatMap { Self.parseTime($0, now: now) },
            until: until.flatMap { Self.parseTime($0, now: now) },
            verify: verify,
            now: now,
            onPurge: format == .csv ? { print(PurgeReport.csvRow($0)) } : nil
        )
        switch format {
        case .text: print(report.text(), terminator: "")
        case .json: print(String(decoding: report.json(), as: UTF8.self))
        case .csv: break
        }
        if report.hasProblem {
            if format == .csv || format == .json {
                let reason = report.chain.map { !$0.verified } ?? false ? "audit chain broken" : "overdue escrows"
                FileHandle.standardError.write(Data("problem: \(reason)\n".utf8))
            }
            throw ExitCode(CLIFailure.problem)
        }
    }
}
