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
        /// The first sequence verified: 1, or the one after the store's checkpoint (earlier events were archived, and
        /// are verified from their segments with `--archive` or `audit verify`).
        public var fromSequence: Int64 = 1
        /// Problems of the archived segments read with `--archive` (each names its file and line).
        public var archiveProblems: [String] = []
        /// Set when the report started from the store's recorded verification (the console's page): the events from
        /// ``fromSequence`` through `recorded.through` were verified when it was recorded, and not read again; only
        /// the later ones were verified now. `profile-escrow audit verify` reads every one again.
        public var recorded: RecordedVerification?
    }

    /// How far an earlier report verified the chain, and when.
    public struct RecordedVerification: Sendable, Equatable {
        public var through: Int64
        public var at: Date
    }

    /// What the report knows of the archived part of the trail.
    public struct ArchiveCoverage: Sendable, Equatable {
        /// The store's newest checkpoint: events up to it were moved to segments.
        public var checkpointSequence: Int64
        /// The segments read (`--archive`).
        public var segments: [String]
        /// Archived events of the period that no segment given holds: not counted. Nil when the period is covered.
        public var uncoveredSequences: ClosedRange<Int64>?
        public var uncoveredFrom: Date?
        public var uncoveredUntil: Date?
        /// Problems of the segments read (each names its file and line): their counts stop at the first one.
        public var problems: [String] = []
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

    /// The Apple token revocations that ended in the period (`apple-token-revoked`, `apple-revocation-failed`): what
    /// the backend asked to revoke at an account's deletion, and whether Apple took it.
    public struct AppleRevocations: Sendable, Equatable, Codable {
        public var revoked: Int
        public var failed: Int

        public init(revoked: Int = 0, failed: Int = 0) {
            self.revoked = revoked
            self.failed = failed
        }
    }

    /// Upper bounds (seconds, inclusive) of the time-to-purge distribution's buckets; the last bucket is open.
    public static let timeToPurgeBuckets: [Double] = [1, 10, 60, 600, 3600, 86_400, 7 * 86_400, 30 * 86_400]

    public var since: Date?
    public var until: Date?
    public var generatedAt: Date
    public var captured = 0
    public var appleRevocations = AppleRevocations()
    public var purged: [PurgeReason: Int] = Dictionary(uniqueKeysWithValues: PurgeReason.allCases.map { ($0, 0) })
    public var timeToPurgeSeconds: Durations?
    public var live: [EscrowState: Int] = [:]
    public var oldestLiveAgeSeconds: Double?
    public var overdue = 0
    public var dead: [DeadEscrow] = []
    public var chain: Chain?
    /// Set when events were archived out of the store.
    public var archive: ArchiveCoverage?
    /// The retention the report was made with (seconds from capture), when known.
    public var retentionSeconds: Double?
    /// Purges by hour and reason, oldest first; hours without a purge left out.
    public var hourly: [HourlyPurges] = []
    /// Purges per time-to-purge bucket: `timeToPurgeBuckets.count + 1` counts, the last one above the last bound.
    public var timeToPurgeDistribution: [Int] = Array(repeating: 0, count: PurgeReport.timeToPurgeBuckets.count + 1)

    /// Whether an auditor should be worried: a broken chain or an overdue escrow (exit code 1).
    public var hasProblem: Bool {
        overdue > 0 || chain.map { !$0.verified } ?? false || !(archive?.problems.isEmpty ?? true)
    }

    /// Verifies the store's chain from `checkpoint` (the genesis when nil) up to the head read first.
    public static func verifyStoreChain(
        _ store: any AuditTrailStore,
        from checkpoint: AuditCheckpoint?,
        pageSize: Int = 20_000
    ) async throws -> Chain {
        var verifier = AuditChain.Verifier(from: checkpoint?.head)
        let head = try await store.auditHead()
        let end = head?.sequence ?? Int64.max
        var cursor = checkpoint?.sequence ?? 0
        while cursor < end {
            let page = try await store.auditEvents(after: cursor, limit: pageSize)
            guard let last = page.last else { break }
            cursor = last.sequence
            for event in page where event.sequence <= end { verifier.consume(event) }
        }
        verifier.finish(head: head)
        return Chain(
            verified: verifier.isIntact,
            events: verifier.eventCount,
            firstBrokenSequence: verifier.firstBrokenSequence,
            headHash: verifier.eventCount > 0 ? Hex.encode(verifier.previous) : nil,
            fromSequence: (checkpoint?.sequence ?? 0) + 1
        )
    }

    /// Builds the report by streaming the audit trail in pages: memory does not depend on the number
    /// of events (time-to-purge percentiles come from an HDR histogram, 3 significant digits; the
    /// maximum is exact).
    /// - Parameters:
    ///   - archives: segment files of the archived events (`--archive`), read for the period before the store's
    ///     checkpoint; archived events of the period that none of them holds are named in ``archive``.
    ///   - onPurge: called for each purge in the period, in order (the CSV rows).
    public static func build(
        store: any AuditTrailStore & OperatorReadStore,
        since: Date? = nil,
        until: Date? = nil,
        verify: Bool,
        archives: [String] = [],
        retentionSeconds: Double? = nil,
        now: Date = Date(),
        pageSize: Int = 20_000,
        onPurge: ((Purge) -> Void)? = nil
    ) async throws -> PurgeReport {
        // An archive cut that deletes events while the report streams moves the checkpoint: read again from the new
        // one (a cut is rare; twice in a row, the report says the chain is broken rather than loop).
        var attempt = 0
        while true {
            attempt += 1
            let checkpoint = try await store.auditCheckpoint()
            let (report, _, _) = try await build(
                store: store,
                checkpoint: checkpoint,
                since: since,
                until: until,
                verify: verify,
                archives: archives,
                retentionSeconds: retentionSeconds,
                now: now,
                pageSize: pageSize,
                onPurge: onPurge
            )
            guard verify, report.chain?.verified == false, attempt < 3,
                try await store.auditCheckpoint()?.sequence != checkpoint?.sequence
            else { return report }
        }
    }

    /// The report of the whole trail until now, its chain verified from the store's recorded checkpoint
    /// (``PurgeReportCheckpointStore``): the counts and the verification of the events up to it are taken as
    /// recorded, and only the events after it are read, chained from its hash; the report says so
    /// (``Chain/recorded``). A verified report records its head as the next checkpoint, so a page loaded again costs
    /// the events written since. With no usable checkpoint (none yet, or one from before an archive cut) it reads
    /// the whole trail, as ``build(store:since:until:verify:archives:retentionSeconds:now:pageSize:onPurge:)``.
    public static func buildFromCheckpoint(
        store: any AuditTrailStore & OperatorReadStore & PurgeReportCheckpointStore,
        retentionSeconds: Double? = nil,
        now: Date = Date(),
        pageSize: Int = 20_000
    ) async throws -> PurgeReport {
        let archived = try await store.auditCheckpoint()
        let head = try await store.auditHead()
        let resume = try await store.purgeReportCheckpoint().flatMap { recorded -> Resume? in
            guard recorded.fromSequence == (archived?.sequence ?? 0) + 1,
                recorded.through.sequence <= head?.sequence ?? 0,
                let tallies = try? JSONDecoder().decode(Tallies.self, from: Data(recorded.tallies))
            else { return nil }
            return Resume(checkpoint: recorded, tallies: tallies)
        }
        var (report, tallies, verifiedHead) = try await build(
            store: store,
            checkpoint: archived,
            since: nil,
            until: nil,
            verify: true,
            archives: [],
            retentionSeconds: retentionSeconds,
            now: now,
            pageSize: pageSize,
            onPurge: nil,
            resume: resume
        )
        report.until = now
        if report.chain?.verified == true, let verifiedHead,
            verifiedHead.sequence > resume?.checkpoint.through.sequence ?? 0
        {
            // A store that refuses the write (open read-only, or busy) still gives its report: the next load goes on
            // from the checkpoint recorded before.
            try? await store.recordPurgeReportCheckpoint(
                PurgeReportCheckpoint(
                    fromSequence: (archived?.sequence ?? 0) + 1,
                    through: verifiedHead,
                    verifiedAt: now,
                    tallies: Array(try JSONEncoder().encode(tallies))
                )
            )
        }
        return report
    }

    /// Where a report starts from a recorded checkpoint: the chain after it, the counts up to it.
    struct Resume {
        var checkpoint: PurgeReportCheckpoint
        var tallies: Tallies
    }

    /// What a report counts of the events it reads, kept as the checkpoint's tallies (JSON) so a later report goes on
    /// from them. A checkpoint recorded without a count added since does not decode, so the next report reads the
    /// whole trail once rather than start that count from zero.
    struct Tallies: Codable, Sendable {
        var captured = 0
        var appleRevocations = AppleRevocations()
        var purged: [PurgeReason: Int] = [:]
        /// Purges by hour (since 1970) and reason.
        var hours: [Int64: [PurgeReason: Int]] = [:]
        var distribution = Array(repeating: 0, count: PurgeReport.timeToPurgeBuckets.count + 1)
        var ages = Histogram<UInt64>(numberOfSignificantValueDigits: .three)
        var maximumAge: Int64 = 0
        /// Events of the chain verified.
        var verifiedEvents = 0

        /// Counts one capture or purge at `at` (milliseconds) within the period; the purge's age, nil otherwise.
        mutating func count(at: Int64, kind: AuditTally.Kind, since: Int64?, until: Int64?) -> Int64? {
            if let since, at < since { return nil }
            if let until, at > until { return nil }
            switch kind {
            case .captured:
                captured += 1
                return nil
            case .appleRevocation(let revoked):
                if revoked { appleRevocations.revoked += 1 } else { appleRevocations.failed += 1 }
                return nil
            case .purged(let reason, let ageMilliseconds):
                if let reason {
                    purged[reason, default: 0] += 1
                    hours[at / 3_600_000, default: [:]][reason, default: 0] += 1
                }
                let age = max(0, ageMilliseconds)
                let bucket = timeToPurgeBuckets.firstIndex { Double(age) <= $0 * 1000 } ?? timeToPurgeBuckets.count
                distribution[bucket] += 1
                _ = ages.record(UInt64(age))
                maximumAge = max(maximumAge, age)
                return age
            }
        }

        /// Puts the counts in `report`.
        func fill(_ report: inout PurgeReport) {
            report.captured = captured
            report.appleRevocations = appleRevocations
            for (reason, count) in purged { report.purged[reason] = count }
            report.hourly = hours.keys.sorted().map {
                HourlyPurges(hour: Date(timeIntervalSince1970: Double($0) * 3600), purged: hours[$0]!)
            }
            report.timeToPurgeDistribution = distribution
            if ages.totalCount > 0 {
                report.timeToPurgeSeconds = Durations(
                    median: Double(ages.valueAtPercentile(50)) / 1000,
                    p95: Double(ages.valueAtPercentile(95)) / 1000,
                    max: Double(maximumAge) / 1000
                )
            }
        }
    }

    /// The report, its counts, and the head its chain was verified to (nil when not verified or empty).
    private static func build(
        store: any AuditTrailStore & OperatorReadStore,
        checkpoint: AuditCheckpoint?,
        since: Date?,
        until: Date?,
        verify: Bool,
        archives: [String],
        retentionSeconds: Double?,
        now: Date,
        pageSize: Int,
        onPurge: ((Purge) -> Void)?,
        resume: Resume? = nil
    ) async throws -> (PurgeReport, Tallies, AuditHead?) {
        var report = PurgeReport(since: since, until: until, generatedAt: now)
        report.retentionSeconds = retentionSeconds
        var tallies = resume?.tallies ?? Tallies()
        var verifier = AuditChain.Verifier(from: resume?.checkpoint.through ?? checkpoint?.head)
        var cursor: Int64 = resume?.checkpoint.through.sequence ?? checkpoint?.sequence ?? 0
        // Verified as of the head read first: writers may append while the report streams (the head and its
        // events are written in one transaction, so every event up to it is there); later events wait for the
        // next report instead of looking like a broken end.
        let head = verify ? try await store.auditHead() : nil
        let end = head?.sequence ?? Int64.max  // no head: read everything (events without a head are a broken chain)
        let sinceMilliseconds = since.map(Timestamp.unixMilliseconds)
        let untilMilliseconds = until.map(Timestamp.unixMilliseconds)
        func count(at: Int64, kind: AuditTally.Kind) -> Int64? {
            tallies.count(at: at, kind: kind, since: sinceMilliseconds, until: untilMilliseconds)
        }
        func emit(_ event: AuditEvent, age: Int64) {
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
        var archiveProblems: [String] = []
        if let checkpoint {
            let archivedThrough = checkpoint.sequence
            var verification: AuditArchiveVerification?
            if !archives.isEmpty {
                // The segments' events up to the checkpoint (the store holds the rest), in order, before the store's.
                verification = try await AuditArchiveVerification.verify(
                    paths: archives,
                    store: store,
                    verifyStore: false,
                    onEvent: { event in
                        guard event.sequence <= archivedThrough, let tally = AuditTally(event),
                            let age = count(at: tally.at, kind: tally.kind)
                        else { return }
                        emit(event, age: age)
                    }
                )
                archiveProblems = verification?.problems ?? []
            }
            report.archive = coverage(
                of: try await store.auditCheckpoints(),
                by: verification?.coveredSequences,
                segments: archives,
                since: sinceMilliseconds,
                until: untilMilliseconds
            )
            report.archive?.problems = archiveProblems
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
                emit(event, age: age)
            }
        }
        if verify {
            verifier.finish(head: head)
            tallies.verifiedEvents += verifier.eventCount
            report.chain = Chain(
                verified: verifier.isIntact && archiveProblems.isEmpty,
                events: tallies.verifiedEvents,
                firstBrokenSequence: verifier.firstBrokenSequence,
                headHash: verifier.eventCount > 0 ? Hex.encode(verifier.previous) : nil,
                fromSequence: (checkpoint?.sequence ?? 0) + 1,
                archiveProblems: archiveProblems,
                recorded: resume.map {
                    RecordedVerification(through: $0.checkpoint.through.sequence, at: $0.checkpoint.verifiedAt)
                }
            )
        }
        tallies.fill(&report)
        let summary = try await store.summary(at: now)
        report.live = summary.live.filter { $0.key != .purged }
        report.oldestLiveAgeSeconds = summary.oldestLiveCreatedAt.map { max(0, now.timeIntervalSince($0)) }
        report.overdue = summary.overdue
        report.dead = summary.dead
        let verifiedHead = verify && verifier.isIntact && verifier.eventCount > 0
            ? AuditHead(sequence: verifier.expectedSequence - 1, hash: verifier.previous) : resume?.checkpoint.through
        return (report, tallies, verifiedHead)
    }

    /// The archived events of the period (between `since` and `until`, milliseconds) that the segments read do not
    /// hold: the cuts outside `covered`, and the time they span.
    static func coverage(
        of checkpoints: [AuditCheckpoint],
        by covered: ClosedRange<Int64>?,
        segments: [String],
        since: Int64?,
        until: Int64?
    ) -> ArchiveCoverage? {
        guard let newest = checkpoints.last else { return nil }
        var coverage = ArchiveCoverage(checkpointSequence: newest.sequence, segments: segments)
        let missing = checkpoints.filter { cut in
            guard let covered else { return true }
            return !(covered.contains(cut.firstSequence) && covered.contains(cut.sequence))
        }
        .filter { cut in
            // A cut wholly outside the period is not needed.
            !(since.map { cut.latestAt < $0 } ?? false) && !(until.map { cut.earliestAt > $0 } ?? false)
        }
        guard let first = missing.first, let last = missing.last else { return coverage }
        coverage.uncoveredSequences = first.firstSequence...last.sequence
        let from = max(missing.map(\.earliestAt).min() ?? 0, since ?? .min)
        let to = min(missing.map(\.latestAt).max() ?? 0, until ?? .max)
        coverage.uncoveredFrom = Timestamp.date(unixMilliseconds: from)
        coverage.uncoveredUntil = Timestamp.date(unixMilliseconds: to)
        return coverage
    }
}
