public import EscrowCore
import EscrowCrypto
public import Foundation
import Histogram

/// What an auditor reads: what was kept, for how long, and why it was purged. Holds no
/// name, email or user identifier: only counts, durations, random escrow ids and codes.
public struct PurgeReport: Sendable, Equatable {
    public struct Durations: Sendable, Equatable {
        public var median: Double
        public var p95: Double
        public var max: Double
    }

    public struct Chain: Sendable, Equatable {
        public var verified: Bool
        public var events: Int
        public var firstBrokenSequence: Int64?
        public var headHash: String?
    }

    /// One purge, for the CSV form.
    public struct Purge: Sendable, Equatable {
        public var sequence: Int64
        public var at: Date
        public var escrowID: String
        public var indexPrefix: String
        public var reason: String
        public var ageSeconds: Double
        public var actor: String
    }

    /// Purges of one hour (UTC), by reason: the "purges by reason over time" chart.
    public struct HourlyPurges: Sendable, Equatable {
        /// The hour's start.
        public var hour: Date
        public var purged: [PurgeReason: Int]
    }

    /// Upper bounds (seconds, inclusive) of the time-to-purge distribution's buckets; the last bucket is open.
    public static let timeToPurgeBuckets: [Double] = [1, 10, 60, 600, 3600, 86_400, 7 * 86_400, 30 * 86_400]

    public var since: Date?
    public var until: Date?
    public var generatedAt: Date
    public var captured = 0
    public var purged: [PurgeReason: Int] = Dictionary(uniqueKeysWithValues: PurgeReason.allCases.map { ($0, 0) })
    public var timeToPurgeSeconds: Durations?
    public var live: [EscrowState: Int] = [:]
    public var oldestLiveAgeSeconds: Double?
    public var overdue = 0
    public var dead: [DeadEscrow] = []
    public var chain: Chain?
    /// The retention the report was made with (seconds from capture), when known.
    public var retentionSeconds: Double?
    /// Purges by hour and reason, oldest first; hours without a purge left out.
    public var hourly: [HourlyPurges] = []
    /// Purges per time-to-purge bucket: `timeToPurgeBuckets.count + 1` counts, the last one above the last bound.
    public var timeToPurgeDistribution: [Int] = Array(repeating: 0, count: PurgeReport.timeToPurgeBuckets.count + 1)

    /// Whether an auditor should be worried: a broken chain or an overdue escrow (exit code 1).
    public var hasProblem: Bool {
        overdue > 0 || chain.map { !$0.verified } ?? false
    }

    /// Builds the report by streaming the audit trail in pages: memory does not depend on the number
    /// of events (time-to-purge percentiles come from an HDR histogram, 3 significant digits; the
    /// maximum is exact).
    /// - Parameter onPurge: called for each purge in the period, in order (the CSV rows).
    public static func build(
        store: any EscrowStore,
        since: Date? = nil,
        until: Date? = nil,
        verify: Bool,
        retentionSeconds: Double? = nil,
        now: Date = Date(),
        pageSize: Int = 20_000,
        onPurge: ((Purge) -> Void)? = nil
    ) async throws -> PurgeReport {
        var report = PurgeReport(since: since, until: until, generatedAt: now)
        report.retentionSeconds = retentionSeconds
        var hours: [Int64: [PurgeReason: Int]] = [:]
        var verifier = AuditChain.Verifier()
        var ages = Histogram<UInt64>(numberOfSignificantValueDigits: .three)
        var maximumAge: Int64 = 0
        var cursor: Int64 = 0
        // Verified as of the head read first: writers may append while the report streams (the head and its
        // events are written in one transaction, so every event up to it is there); later events wait for the
        // next report instead of looking like a broken end.
        let head = verify ? try await store.auditHead() : nil
        let end = head?.sequence ?? Int64.max  // no head: read everything (events without a head are a broken chain)
        let sinceMilliseconds = since.map(Timestamp.unixMilliseconds)
        let untilMilliseconds = until.map(Timestamp.unixMilliseconds)
        func count(at: Int64, kind: AuditTally.Kind) -> Int64? {
            if let sinceMilliseconds, at < sinceMilliseconds { return nil }
            if let untilMilliseconds, at > untilMilliseconds { return nil }
            switch kind {
            case .captured:
                report.captured += 1
                return nil
            case .purged(let reason, let ageMilliseconds):
                if let reason {
                    report.purged[reason, default: 0] += 1
                    hours[at / 3_600_000, default: [:]][reason, default: 0] += 1
                }
                let age = max(0, ageMilliseconds)
                let bucket = timeToPurgeBuckets.firstIndex { Double(age) <= $0 * 1000 } ?? timeToPurgeBuckets.count
                report.timeToPurgeDistribution[bucket] += 1
                _ = ages.record(UInt64(age))
                maximumAge = max(maximumAge, age)
                return age
            }
        }
        if !verify, onPurge == nil {
            // Counting only: the lean read of the columns counted.
            while true {
                let page = try await store.auditTallies(after: cursor, limit: pageSize)
                guard let last = page.last else { break }
                cursor = last.sequence
                for tally in page { _ = count(at: tally.at, kind: tally.kind) }
            }
        }
        while verify || onPurge != nil, cursor < end {
            let page = try await store.auditEvents(after: cursor, limit: pageSize)
            guard let last = page.last else { break }
            cursor = last.sequence
            for event in page where event.sequence <= end {
                if verify { verifier.consume(event) }
                guard let tally = AuditTally(event), let age = count(at: tally.at, kind: tally.kind) else { continue }
                let draft = event.draft
                onPurge?(
                    Purge(
                        sequence: event.sequence,
                        at: draft.at,
                        escrowID: draft.escrowID ?? "",
                        indexPrefix: draft.indexPrefix ?? "",
                        reason: draft.detail ?? "",
                        ageSeconds: Double(age) / 1000,
                        actor: draft.actor.rawValue
                    )
                )
            }
        }
        report.hourly = hours.keys.sorted().map {
            HourlyPurges(hour: Date(timeIntervalSince1970: Double($0) * 3600), purged: hours[$0]!)
        }
        if ages.totalCount > 0 {
            report.timeToPurgeSeconds = Durations(
                median: Double(ages.valueAtPercentile(50)) / 1000,
                p95: Double(ages.valueAtPercentile(95)) / 1000,
                max: Double(maximumAge) / 1000
            )
        }
        if verify {
            verifier.finish(head: head)
            report.chain = Chain(
                verified: verifier.isIntact,
                events: verifier.eventCount,
                firstBrokenSequence: verifier.firstBrokenSequence,
                headHash: verifier.eventCount > 0 ? Hex.encode(verifier.previous) : nil
            )
        }
        let summary = try await store.summary(at: now)
        report.live = summary.live.filter { $0.key != .purged }
        report.oldestLiveAgeSeconds = summary.oldestLiveCreatedAt.map { max(0, now.timeIntervalSince($0)) }
        report.overdue = summary.overdue
        report.dead = summary.dead
        return report
    }
}
