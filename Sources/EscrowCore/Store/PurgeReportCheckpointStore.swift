public import Foundation

/// How far the purge report has verified the audit chain, and its counts up to there: a later report verifies and
/// counts only the events after `through`, chaining from its hash.
public struct PurgeReportCheckpoint: Sendable, Equatable {
    /// The first event of the verified range: the one after the archive's checkpoint then (1 when nothing was
    /// archived). A report made from another archive checkpoint cannot use it.
    public var fromSequence: Int64
    /// The last event verified, and its hash.
    public var through: AuditHead
    /// When the range was verified.
    public var verifiedAt: Date
    /// The report's counts of the events up to `through`, in the report's own encoding (the store keeps the bytes).
    public var tallies: [UInt8]

    public init(fromSequence: Int64, through: AuditHead, verifiedAt: Date, tallies: [UInt8]) {
        self.fromSequence = fromSequence
        self.through = through
        self.verifiedAt = verifiedAt
        self.tallies = tallies
    }
}

/// The purge report's checkpoint, one for the store: every node's report starts from the furthest one recorded.
public protocol PurgeReportCheckpointStore: Sendable {
    /// The checkpoint recorded; nil before the first verified report.
    func purgeReportCheckpoint() async throws -> PurgeReportCheckpoint?

    /// Records `checkpoint` in place of the one recorded when it goes further, or starts from another first event (an
    /// archive cut moved the chain's start); two nodes recording at once keep the furthest.
    func recordPurgeReportCheckpoint(_ checkpoint: PurgeReportCheckpoint) async throws
}
