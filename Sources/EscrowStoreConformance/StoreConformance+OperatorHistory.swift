import EscrowCore
import Foundation

/// The overview's backlog history and the purge report's checkpoint: shared by every store open on the same data,
/// bounded, the furthest checkpoint kept.
extension StoreConformance {
    static let operatorHistoryChecks: [Check] = [
        Check(
            name: "the backlog history is shared, one sample a slot, a window kept",
            escrows: backlogHistoryIsBounded
        ),
        Check(name: "the purge report checkpoint keeps the furthest", escrows: purgeReportCheckpointKeepsFurthest),
    ]

    static func backlogHistoryIsBounded(_ make: MakeStore) async throws {
        let node = try await make()
        let other = try await make()
        let start = Fixture().start  // a multiple of 300 seconds
        func sample(_ seconds: Double, pending: Int) -> BacklogSample {
            BacklogSample(
                at: start.addingTimeInterval(seconds),
                pending: pending,
                dead: 1,
                oldestPendingAgeSeconds: nil
            )
        }
        try await node.recordBacklogSample(sample(10, pending: 1), slotSeconds: 300, window: 3600)
        // The same slot from another node, newer then older: the newest stays.
        try await other.recordBacklogSample(sample(20, pending: 2), slotSeconds: 300, window: 3600)
        try await node.recordBacklogSample(sample(15, pending: 3), slotSeconds: 300, window: 3600)
        try await other.recordBacklogSample(
            BacklogSample(at: start.addingTimeInterval(400), pending: 4, dead: 0, oldestPendingAgeSeconds: 12),
            slotSeconds: 300,
            window: 3600
        )
        var samples = try await node.backlogSamples(since: start)
        try expect(
            samples.map(\.pending) == [2, 4] && samples.last?.oldestPendingAgeSeconds == 12,
            "one sample a slot, the newest, from either node, oldest first: \(samples)"
        )
        try await node.recordBacklogSample(sample(3700, pending: 5), slotSeconds: 300, window: 3600)
        samples = try await other.backlogSamples(since: start)
        try expect(samples.map(\.pending) == [4, 5], "samples older than the window are deleted: \(samples)")
        try expect(
            try await node.backlogSamples(since: start.addingTimeInterval(3600)).map(\.pending) == [5],
            "a read from a time leaves earlier samples out"
        )
    }

    static func purgeReportCheckpointKeepsFurthest(_ make: MakeStore) async throws {
        let node = try await make()
        let other = try await make()
        let start = Fixture().start
        try expect(try await node.purgeReportCheckpoint() == nil, "no checkpoint before the first report")
        func checkpoint(from: Int64, through: Int64) -> PurgeReportCheckpoint {
            PurgeReportCheckpoint(
                fromSequence: from,
                through: AuditHead(sequence: through, hash: Array(repeating: UInt8(through), count: 32)),
                verifiedAt: start.addingTimeInterval(Double(through)),
                tallies: Array("counts \(through)".utf8)
            )
        }
        try await node.recordPurgeReportCheckpoint(checkpoint(from: 1, through: 20))
        try await other.recordPurgeReportCheckpoint(checkpoint(from: 1, through: 10))
        try expect(
            try await other.purgeReportCheckpoint() == checkpoint(from: 1, through: 20),
            "a checkpoint behind the recorded one changes nothing"
        )
        try await other.recordPurgeReportCheckpoint(checkpoint(from: 1, through: 30))
        try expect(
            try await node.purgeReportCheckpoint() == checkpoint(from: 1, through: 30),
            "a further one replaces it, seen by every node"
        )
        try await node.recordPurgeReportCheckpoint(checkpoint(from: 12, through: 25))
        try expect(
            try await other.purgeReportCheckpoint() == checkpoint(from: 12, through: 25),
            "one from another start (an archive cut) replaces it"
        )
    }
}
