import EscrowCore
import Foundation
import Mustache
public import ProfileEscrow

extension PurgeReport {
    /// Where the HTML document goes, which decides its stylesheet and its links.
    public enum HTMLDestination: Sendable {
        /// A file (`purge-report --format html`): the stylesheet inside it, so it opens offline and prints.
        case file
        /// The admin API's `format=html`: the console's stylesheet, linked.
        case api
        /// The console's page: as the API's, with a link back to the console.
        case console
    }

    /// The report as an HTML document for an auditor, from the `purge-report` template: the summary, purges by
    /// reason over time and the time-to-purge distribution as inline SVG charts, the retention setting, live and dead
    /// escrows and the chain verification. No script; no resource from elsewhere. Throws
    /// ``PageTemplates/Missing`` when the templates are not installed beside the binary.
    public func html(for destination: HTMLDestination = .file) throws -> String {
        let templates = try PageTemplates.load()
        let stylesheet =
            switch destination {
            case .file: "data:text/css;base64," + Data(templates.stylesheet.utf8).base64EncodedString()
            case .api, .console: ConsolePages.stylesheetPath
            }
        return templates.render(
            "purge-report",
            PurgeReportDocument(self, stylesheet, backLink: destination == .console)
        )
    }
}

/// What the `purge-report` template shows: the report's values as text, its charts as geometry.
struct PurgeReportDocument {
    struct Count {
        var name: String
        var count: Int
        var color = 0
    }

    struct Dead {
        var escrowID: String
        var code: String
    }

    struct Archive {
        var sentence: String
        var problems: [String]
        var intact: Bool
    }

    struct Chain {
        var verified: Bool
        var events: Int
        var headHash: String
        var brokenAt: String
        /// Where this report took an earlier verification as recorded, and read only the events after it.
        var recorded: Recorded?
    }

    /// The earlier report's verification this one went on from: through which event, verified when.
    struct Recorded {
        var through: Int64
        var at: String
    }

    var stylesheet: String
    var backLink: Bool
    var since: String
    var until: String
    var generated: String
    var retention: String
    var cards: [Card]
    var overTime: Chart?
    var unit: String
    var distribution: Chart?
    var reasons: [Count]
    var live: [Count]
    var oldestLive: String
    var overdue: Int
    /// The Apple token revocations that ended in the period: revoked, failed.
    var appleRevocations: PurgeReport.AppleRevocations
    var deadCount: Int
    var hasDead: Bool
    var dead: [Dead]
    var deadMore: Int?
    var archive: Archive?
    var checkpoint: Int64?
    var chain: Chain?

    /// The dead escrows listed; the JSON form has them all.
    static let deadShown = 200

    /// Each reason's palette colour (`c0` … in the stylesheet).
    static let reasonColors: [PurgeReason: Int] = [
        .erased: 0, .confirmed: 1, .expired: 2, .accountDeleted: 3, .revoked: 4, .replaced: 6,
    ]

    init(_ report: PurgeReport, _ stylesheet: String, backLink: Bool) {
        self.stylesheet = stylesheet
        self.backLink = backLink
        since = report.since.map(Timestamp.seconds) ?? "beginning of the trail"
        until = report.until.map(Timestamp.seconds) ?? "now"
        generated = Timestamp.seconds(report.generatedAt)
        retention = report.retentionSeconds.map(Self.whole) ?? "not given"
        cards = Self.cards(report)
        (overTime, unit) = Self.overTime(report)
        distribution = Self.distribution(report)
        reasons = PurgeReason.allCases.map {
            Count(name: $0.rawValue, count: report.purged[$0] ?? 0, color: Self.reasonColors[$0] ?? 6)
        }
        live = EscrowState.live.map { Count(name: $0.rawValue, count: report.live[$0] ?? 0) }
        oldestLive = report.oldestLiveAgeSeconds.map(PurgeReport.human) ?? "-"
        overdue = report.overdue
        appleRevocations = report.appleRevocations
        deadCount = report.dead.count
        hasDead = !report.dead.isEmpty
        dead = report.dead.prefix(Self.deadShown).map { Dead(escrowID: $0.idHex, code: $0.code?.rawValue ?? "-") }
        deadMore = report.dead.count > Self.deadShown ? report.dead.count - Self.deadShown : nil
        archive = report.archive.map {
            Archive(
                sentence: $0.sentence,
                problems: $0.problems,
                intact: $0.uncoveredSequences == nil && $0.problems.isEmpty
            )
        }
        checkpoint = report.chain.flatMap { $0.fromSequence > 1 ? $0.fromSequence : nil }
        chain = report.chain.map {
            Chain(
                verified: $0.verified,
                events: $0.events,
                headHash: $0.headHash ?? "-",
                brokenAt: $0.firstBrokenSequence.map(String.init) ?? "?",
                recorded: $0.recorded.map { recorded in
                    Recorded(through: recorded.through, at: Timestamp.seconds(recorded.at))
                }
            )
        }
    }

    static func cards(_ report: PurgeReport) -> [Card] {
        let chain: Card
        switch report.chain {
        case .none: chain = Card(label: "Audit chain", value: "not checked", kind: "none")
        case .some(let verification) where verification.verified:
            chain = Card(label: "Audit chain", value: "verified", kind: "ok")
        case .some(let verification):
            let at = verification.firstBrokenSequence.map(String.init) ?? "?"
            chain = Card(label: "Audit chain", value: "broken at \(at)", kind: "bad")
        }
        func duration(_ value: Double?) -> String { value.map(PurgeReport.human) ?? "-" }
        return [
            Card(label: "Captured", value: "\(report.captured)"),
            Card(label: "Purged", value: "\(report.purged.values.reduce(0, +))"),
            Card(label: "Live now", value: "\(report.live.values.reduce(0, +))"),
            Card(label: "Overdue", value: "\(report.overdue)", kind: report.overdue > 0 ? "bad" : "ok"),
            Card(label: "Median time to purge", value: duration(report.timeToPurgeSeconds?.median)),
            Card(label: "p95 time to purge", value: duration(report.timeToPurgeSeconds?.p95)),
            Card(label: "Longest time to purge", value: duration(report.timeToPurgeSeconds?.max)),
            chain,
        ]
    }

    /// Stacked columns of purges by reason: one an hour for up to 3 days, a day for up to 90 days, else a week; and
    /// the unit's name.
    static func overTime(_ report: PurgeReport) -> (Chart?, String) {
        guard let first = report.hourly.first?.hour, let last = report.hourly.last?.hour else { return (nil, "") }
        let span = last.timeIntervalSince(first)
        let step: Double = span <= 72 * 3600 ? 3600 : span <= 90 * 86_400 ? 86_400 : 7 * 86_400
        let start = (first.timeIntervalSince1970 / step).rounded(.down) * step
        let count = Int(((last.timeIntervalSince1970 - start) / step).rounded(.down)) + 1
        var totals = Array(repeating: [PurgeReason: Int](), count: count)
        for entry in report.hourly {
            let index = Int(((entry.hour.timeIntervalSince1970 - start) / step).rounded(.down))
            for (reason, n) in entry.purged { totals[index][reason, default: 0] += n }
        }
        let columns = totals.map { column in
            PurgeReason.allCases.map { reason in
                (column[reason] ?? 0, reasonColors[reason] ?? 6, "\(reason.rawValue): \(column[reason] ?? 0)")
            }
        }
        // Up to 8 time labels along the axis.
        let labelEvery = max(1, Int((Double(count) / 8).rounded(.up)))
        let axis = stride(from: 0, to: count, by: labelEvery).map { index in
            let time = Timestamp.seconds(Date(timeIntervalSince1970: start + Double(index) * step))
            let text =
                step < 86_400 ? time.prefix(16).replacingOccurrences(of: "T", with: " ") : String(time.prefix(10))
            return (index, text)
        }
        let chart = Chart.columns("Purges by reason over time", columns, axis: axis, height: 260)
        return (chart, step == 3600 ? "hour" : step == 86_400 ? "day" : "week")
    }

    /// Columns of purges per time-to-purge bucket, each with its count.
    static func distribution(_ report: PurgeReport) -> Chart? {
        let buckets = report.distribution
        guard buckets.contains(where: { $0.count > 0 }) else { return nil }
        let labels = buckets.map { bucket in
            bucket.upToSeconds.map { "≤ " + whole($0) } ?? "> " + whole(PurgeReport.timeToPurgeBuckets.last ?? 0)
        }
        return Chart.columns(
            "Time to purge distribution",
            zip(buckets, labels).map { bucket, label in [(bucket.count, 0, "\(label): \(bucket.count)")] },
            axis: labels.enumerated().map { ($0.offset, $0.element) },
            height: 220,
            countOnTop: true
        )
    }

    /// A bound in its largest whole unit: `1 s`, `10 min`, `7 days`, else ``PurgeReport/human(_:)``.
    static func whole(_ seconds: Double) -> String {
        for (unit, name) in [(86_400.0, "d"), (3600, "h"), (60, "min"), (1, "s")]
        where seconds >= unit && (seconds / unit).rounded() == seconds / unit {
            let count = Int(seconds / unit)
            return name == "d" ? "\(count) day\(count == 1 ? "" : "s")" : "\(count) \(name)"
        }
        return PurgeReport.human(seconds)
    }
}

// Rows read by name through `MustacheParent`, not through `Mirror` (see `Chart`).

extension PurgeReportDocument.Count: MustacheParent {
    func child(named name: String) -> Any? {
        switch name {
        case "name": self.name
        case "count": count
        case "color": color
        default: nil
        }
    }
}

extension PurgeReportDocument.Dead: MustacheParent {
    func child(named name: String) -> Any? {
        switch name {
        case "escrowID": escrowID
        case "code": code
        default: nil
        }
    }
}
