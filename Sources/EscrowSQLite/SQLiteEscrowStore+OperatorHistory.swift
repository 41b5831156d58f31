public import EscrowCore
public import Foundation
import GRDB

/// The overview's backlog samples and the purge report's checkpoint, in the escrow database.
extension SQLiteEscrowStore {
    public func recordBacklogSample(_ sample: BacklogSample, slotSeconds: Int, window: TimeInterval) async throws {
        let at = Timestamp.unixMilliseconds(sample.at)
        let slot = at / (Int64(slotSeconds) * 1000)
        let oldest = Timestamp.unixMilliseconds(sample.at.addingTimeInterval(-window))
        // A lost sample costs one point of a chart: no wait for the disk.
        try await write(durable: false) { transaction in
            let db = transaction.db
            try db.execute(
                sql: """
                    INSERT INTO backlog_sample (slot, at, pending, dead, oldest_pending_age_s) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (slot) DO UPDATE SET at = excluded.at, pending = excluded.pending,
                        dead = excluded.dead, oldest_pending_age_s = excluded.oldest_pending_age_s
                    WHERE excluded.at > backlog_sample.at
                    """,
                arguments: [slot, at, sample.pending, sample.dead, sample.oldestPendingAgeSeconds]
            )
            try db.execute(sql: "DELETE FROM backlog_sample WHERE at < ?", arguments: [oldest])
        }
    }

    public func backlogSamples(since: Date) async throws -> [BacklogSample] {
        try await read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT at, pending, dead, oldest_pending_age_s FROM backlog_sample WHERE at >= ? ORDER BY slot
                        """
                ),
                arguments: [Timestamp.unixMilliseconds(since)]
            ).map { row in
                BacklogSample(
                    at: Timestamp.date(unixMilliseconds: row["at"]),
                    pending: row["pending"],
                    dead: row["dead"],
                    oldestPendingAgeSeconds: row["oldest_pending_age_s"]
                )
            }
        }
    }

    public func purgeReportCheckpoint() async throws -> PurgeReportCheckpoint? {
        try await read { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT from_seq, through_seq, head_hash, verified_at, tallies FROM purge_report_checkpoint
                    WHERE id = 1
                    """
            ).map { row in
                PurgeReportCheckpoint(
                    fromSequence: row["from_seq"],
                    through: AuditHead(sequence: row["through_seq"], hash: [UInt8](row["head_hash"] as Data)),
                    verifiedAt: Timestamp.date(unixMilliseconds: row["verified_at"]),
                    tallies: [UInt8](row["tallies"] as Data)
                )
            }
        }
    }

    public func recordPurgeReportCheckpoint(_ checkpoint: PurgeReportCheckpoint) async throws {
        try await write { transaction in
            try transaction.db.execute(
                sql: """
                    INSERT INTO purge_report_checkpoint (id, from_seq, through_seq, head_hash, verified_at, tallies)
                    VALUES (1, ?, ?, ?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET from_seq = excluded.from_seq, through_seq = excluded.through_seq,
                        head_hash = excluded.head_hash, verified_at = excluded.verified_at, tallies = excluded.tallies
                    WHERE excluded.through_seq > purge_report_checkpoint.through_seq
                        OR excluded.from_seq != purge_report_checkpoint.from_seq
                    """,
                arguments: [
                    checkpoint.fromSequence, checkpoint.through.sequence, Data(checkpoint.through.hash),
                    Timestamp.unixMilliseconds(checkpoint.verifiedAt), Data(checkpoint.tallies),
                ]
            )
        }
    }
}
