import EscrowCore
import EscrowCrypto
public import Foundation

extension PurgeReport: Encodable {
    /// The JSON form (the documented keys, see docs/purge-report.md): pretty-printed, keys sorted; times RFC 3339 with
    /// milliseconds, durations in seconds rounded to the millisecond, `null` for what is unknown.
    public func json() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        // Only strings, integers, booleans and finite numbers: encoding cannot fail.
        return (try? encoder.encode(self)) ?? Data()
    }

    private enum Keys: String, CodingKey {
        case since, until, generatedAt, captured, purged, timeToPurgeSeconds, live, oldestLiveAgeSeconds, overdue
        case dead, chain, retentionSeconds, timeToPurgeDistribution, purgesByHour, archive, appleRevocations
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(since.map(Timestamp.milliseconds), forKey: .since)
        try container.encode(until.map(Timestamp.milliseconds), forKey: .until)
        try container.encode(Timestamp.milliseconds(generatedAt), forKey: .generatedAt)
        try container.encode(captured, forKey: .captured)
        try container.encode(appleRevocations, forKey: .appleRevocations)
        let purged = Dictionary(uniqueKeysWithValues: PurgeReason.allCases.map { ($0.rawValue, self.purged[$0] ?? 0) })
        try container.encode(purged, forKey: .purged)
        try container.encode(SecondsJSON(timeToPurgeSeconds), forKey: .timeToPurgeSeconds)
        let live = Dictionary(uniqueKeysWithValues: EscrowState.live.map { ($0.rawValue, self.live[$0] ?? 0) })
        try container.encode(live, forKey: .live)
        try container.encode(oldestLiveAgeSeconds.map(Self.millisecondPrecision), forKey: .oldestLiveAgeSeconds)
        try container.encode(overdue, forKey: .overdue)
        try container.encode(dead.map(DeadJSON.init), forKey: .dead)
        try container.encodeIfPresent(chain, forKey: .chain)
        try container.encode(retentionSeconds, forKey: .retentionSeconds)
        try container.encode(distribution.map(BucketJSON.init), forKey: .timeToPurgeDistribution)
        try container.encode(hourly.map(HourJSON.init), forKey: .purgesByHour)
        try container.encodeIfPresent(archive, forKey: .archive)
    }

    /// The time-to-purge buckets as `(upper bound in seconds or nil for the open one, count)`.
    public var distribution: [(upToSeconds: Double?, count: Int)] {
        timeToPurgeDistribution.enumerated().map { index, count in
            (index < Self.timeToPurgeBuckets.count ? Self.timeToPurgeBuckets[index] : nil, count)
        }
    }

    /// `{"upToSeconds": 60 | null, "count": …}`.
    private struct BucketJSON: Encodable {
        let upToSeconds: Double?
        let count: Int

        init(_ bucket: (upToSeconds: Double?, count: Int)) {
            upToSeconds = bucket.upToSeconds
            count = bucket.count
        }

        private enum Keys: String, CodingKey { case upToSeconds, count }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(upToSeconds, forKey: .upToSeconds)
            try container.encode(count, forKey: .count)
        }
    }

    /// `{"hour": "…", "purged": {reason: count, …}}`, every reason present.
    private struct HourJSON: Encodable {
        let hour: String
        let purged: [String: Int]

        init(_ hourly: HourlyPurges) {
            hour = Timestamp.milliseconds(hourly.hour)
            purged = Dictionary(
                uniqueKeysWithValues: PurgeReason.allCases.map { ($0.rawValue, hourly.purged[$0] ?? 0) }
            )
        }
    }

    static func millisecondPrecision(_ seconds: Double) -> Double { (seconds * 1000).rounded() / 1000 }

    /// `{"median": …, "p95": …, "max": …}`, each `null` when no purge was timed.
    private struct SecondsJSON: Encodable {
        let durations: Durations?

        init(_ durations: Durations?) { self.durations = durations }

        private enum Keys: String, CodingKey { case median, p95, max }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(durations.map { PurgeReport.millisecondPrecision($0.median) }, forKey: .median)
            try container.encode(durations.map { PurgeReport.millisecondPrecision($0.p95) }, forKey: .p95)
            try container.encode(durations.map { PurgeReport.millisecondPrecision($0.max) }, forKey: .max)
        }
    }

    /// `{"escrowId": …, "code": … | null}`.
    private struct DeadJSON: Encodable {
        let escrowId: String
        let code: String?

        init(_ dead: DeadEscrow) {
            escrowId = dead.idHex
            code = dead.code?.rawValue
        }

        private enum Keys: String, CodingKey { case escrowId, code }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(escrowId, forKey: .escrowId)
            try container.encode(code, forKey: .code)
        }
    }
}

extension PurgeReport.Chain: Encodable {
    private enum Keys: String, CodingKey {
        case verified, events, firstBrokenSequence, headHash, fromSequence, archiveProblems
    }

    /// `firstBrokenSequence` and `headHash` are `null` when absent.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(verified, forKey: .verified)
        try container.encode(events, forKey: .events)
        try container.encode(firstBrokenSequence, forKey: .firstBrokenSequence)
        try container.encode(headHash, forKey: .headHash)
        try container.encode(fromSequence, forKey: .fromSequence)
        try container.encode(archiveProblems, forKey: .archiveProblems)
    }
}

extension PurgeReport.ArchiveCoverage: Encodable {
    private enum Keys: String, CodingKey {
        case checkpointSequence, segments, uncoveredFromSequence, uncoveredToSequence, uncoveredFrom, uncoveredUntil
        case problems
    }

    /// The `uncovered…` keys are `null` when the period is covered.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(checkpointSequence, forKey: .checkpointSequence)
        try container.encode(segments, forKey: .segments)
        try container.encode(uncoveredSequences?.lowerBound, forKey: .uncoveredFromSequence)
        try container.encode(uncoveredSequences?.upperBound, forKey: .uncoveredToSequence)
        try container.encode(uncoveredFrom.map(Timestamp.milliseconds), forKey: .uncoveredFrom)
        try container.encode(uncoveredUntil.map(Timestamp.milliseconds), forKey: .uncoveredUntil)
        try container.encode(problems, forKey: .problems)
    }

    /// One sentence for the text and CSV forms.
    public var sentence: String {
        guard let sequences = uncoveredSequences else {
            return "events up to sequence \(checkpointSequence) archived; the period is covered"
                + (segments.isEmpty ? "" : " (\(segments.count) segment(s) read)")
        }
        let from = uncoveredFrom.map(Timestamp.milliseconds) ?? "?"
        let to = uncoveredUntil.map(Timestamp.milliseconds) ?? "?"
        return "NOT COVERED: \(from) .. \(to) (sequences \(sequences.lowerBound)-\(sequences.upperBound)) was "
            + "archived and is in no segment given: pass its segments with --archive"
    }
}

extension PurgeReport {
    /// The readable table.
    public func text() -> String {
        func seconds(_ value: Double?) -> String { value.map { Self.human($0) } ?? "-" }
        var lines: [String] = []
        lines.append("ProfileEscrow purge report")
        let from = since.map(Timestamp.milliseconds) ?? "beginning"
        lines.append("  period            \(from) .. \(until.map(Timestamp.milliseconds) ?? "now")")
        lines.append("  generated         \(Timestamp.milliseconds(generatedAt))")
        lines.append("  retention         \(seconds(retentionSeconds))")
        lines.append("")
        lines.append("  captured          \(captured)")
        lines.append("  purged            \(purged.values.reduce(0, +))")
        for reason in PurgeReason.allCases {
            lines.append(
                "    \(reason.rawValue.padding(toLength: 16, withPad: " ", startingAt: 0))\(purged[reason] ?? 0)"
            )
        }
        lines.append("  apple revocations \(appleRevocations.revoked) revoked, \(appleRevocations.failed) failed")
        lines.append(
            "  time to purge     median \(seconds(timeToPurgeSeconds?.median)), "
                + "p95 \(seconds(timeToPurgeSeconds?.p95)), max \(seconds(timeToPurgeSeconds?.max))"
        )
        lines.append("")
        lines.append("  live now          \(live.values.reduce(0, +)) (oldest \(seconds(oldestLiveAgeSeconds)))")
        for state in EscrowState.live {
            lines.append("    \(state.rawValue.padding(toLength: 22, withPad: " ", startingAt: 0))\(live[state] ?? 0)")
        }
        lines.append("  overdue           \(overdue)\(overdue > 0 ? "   <-- past retention and not purged" : "")")
        lines.append("  dead              \(dead.count)")
        for entry in dead.prefix(50) {
            lines.append("    \(entry.idHex)  \(entry.code?.rawValue ?? "-")")
        }
        if dead.count > 50 { lines.append("    ... \(dead.count - 50) more (use --format json)") }
        if let archive {
            lines.append("")
            lines.append("  archive           \(archive.sentence)")
            if chain == nil { lines += archive.problems.map { "    SEGMENT PROBLEM: \($0)" } }
        }
        if let chain {
            lines.append("")
            let from = chain.fromSequence > 1 ? " from sequence \(chain.fromSequence) (the checkpoint)" : ""
            if chain.verified {
                lines.append(
                    "  audit chain       verified, \(chain.events) events\(from), head \(chain.headHash ?? "-")"
                )
            } else if let broken = chain.firstBrokenSequence {
                lines.append("  audit chain       BROKEN at sequence \(broken) (\(chain.events) events read\(from))")
            } else {
                lines.append("  audit chain       store verified\(from); the archived segments do NOT")
            }
            for problem in chain.archiveProblems { lines.append("    \(problem)") }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The summary above the CSV rows: `# key: value` lines with the facts of the JSON form (the chain result
    /// included), which CSV readers skip as comments (`comment="#"` in pandas, `--comment` elsewhere).
    public func csvSummary() -> String {
        func seconds(_ value: Double?) -> String { value.map { String(format: "%.3f", $0) } ?? "null" }
        var lines = [
            "ProfileEscrow purge report",
            "since: \(since.map(Timestamp.milliseconds) ?? "null")",
            "until: \(until.map(Timestamp.milliseconds) ?? "null")",
            "generatedAt: \(Timestamp.milliseconds(generatedAt))",
            "retentionSeconds: \(seconds(retentionSeconds))",
            "captured: \(captured)",
        ]
        lines += PurgeReason.allCases.map { "purged.\($0.rawValue): \(purged[$0] ?? 0)" }
        lines.append("appleRevocations.revoked: \(appleRevocations.revoked)")
        lines.append("appleRevocations.failed: \(appleRevocations.failed)")
        lines.append("timeToPurgeSeconds.median: \(seconds(timeToPurgeSeconds?.median))")
        lines.append("timeToPurgeSeconds.p95: \(seconds(timeToPurgeSeconds?.p95))")
        lines.append("timeToPurgeSeconds.max: \(seconds(timeToPurgeSeconds?.max))")
        lines += distribution.map {
            "timeToPurgeDistribution.\($0.upToSeconds.map { "le\(Int($0))" } ?? "above"): \($0.count)"
        }
        lines += EscrowState.live.map { "live.\($0.rawValue): \(live[$0] ?? 0)" }
        lines.append("oldestLiveAgeSeconds: \(seconds(oldestLiveAgeSeconds))")
        lines.append("overdue: \(overdue)")
        lines.append("dead: \(dead.map { "\($0.idHex)=\($0.code?.rawValue ?? "null")" }.joined(separator: " "))")
        if let chain {
            lines.append("chain.verified: \(chain.verified)")
            lines.append("chain.events: \(chain.events)")
            lines.append("chain.firstBrokenSequence: \(chain.firstBrokenSequence.map(String.init) ?? "null")")
            lines.append("chain.headHash: \(chain.headHash ?? "null")")
            lines.append("chain.fromSequence: \(chain.fromSequence)")
            lines += chain.archiveProblems.map { "chain.archiveProblem: \($0)" }
        } else {
            lines.append("chain.verified: null (not checked: pass --verify)")
        }
        if let archive { lines.append("archive: \(archive.sentence)") }
        return lines.map { "# " + $0 }.joined(separator: "\n") + "\n"
    }

    /// The CSV header; each purge is one row from ``csvRow(_:)``.
    public static let csvHeader = "sequence,purgedAt,escrowId,indexPrefix,reason,ageSeconds,actor"

    public static func csvRow(_ purge: Purge) -> String {
        // Ids, prefixes, reasons and actors never hold commas or quotes; quote the actor anyway.
        let actor = "\"" + purge.actor.replacingOccurrences(of: "\"", with: "\"\"") + "\""
        let at = Timestamp.milliseconds(purge.at)
        return "\(purge.sequence),\(at),\(purge.escrowID),\(purge.indexPrefix),\(purge.reason),"
            + "\(String(format: "%.3f", purge.ageSeconds)),\(actor)"
    }

    /// A duration for a person: `850ms`, `12.5s`, `3.2m`, `1.5h`, `4.0d`.
    public static func human(_ seconds: Double) -> String {
        switch seconds {
        case ..<1: String(format: "%.0fms", seconds * 1000)
        case ..<120: String(format: "%.1fs", seconds)
        case ..<7200: String(format: "%.1fm", seconds / 60)
        case ..<172_800: String(format: "%.1fh", seconds / 3600)
        default: String(format: "%.1fd", seconds / 86400)
        }
    }
}
