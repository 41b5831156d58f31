public import EscrowCore
public import Foundation
import PostgresNIO

/// The overview's backlog samples and the purge report's checkpoint, in the shared database.
extension PostgresEscrowStore {
    public func recordBacklogSample(_ sample: BacklogSample, slotSeconds: Int, window: TimeInterval) async throws {
        try requireWritable()
        let logger = database.logger
        let at = Self.ms(sample.at)
        let slot = at / (Int64(slotSeconds) * 1000)
        let oldest = Self.ms(sample.at.addingTimeInterval(-window))
        let pending = Int64(sample.pending)
        let dead = Int64(sample.dead)
        let age = sample.oldestPendingAgeSeconds.map(Int64.init)
        // A lost sample costs one point of a chart: no wait for the WAL flush.
        try await database.transaction("recording a backlog sample failed", durable: false) { connection in
            try await connection.query(
                """
                INSERT INTO backlog_sample (slot, at, pending, dead, oldest_pending_age_s)
                VALUES (\(slot), \(at), \(pending), \(dead), \(age))
                ON CONFLICT (slot) DO UPDATE SET at = excluded.at, pending = excluded.pending, dead = excluded.dead,
                    oldest_pending_age_s = excluded.oldest_pending_age_s
                WHERE excluded.at > backlog_sample.at
                """,
                logger: logger
            )
            try await connection.query("DELETE FROM backlog_sample WHERE at < \(oldest)", logger: logger)
        }
    }

    public func backlogSamples(since: Date) async throws -> [BacklogSample] {
        let rows = try await database.rows(
            "backlog history read failed",
            """
            SELECT at, pending, dead, oldest_pending_age_s FROM backlog_sample WHERE at >= \(Self.ms(since))
            ORDER BY slot
            """
        )
        return try rows.map { row in
            let (at, pending, dead, age) = try decode(row, (Int64, Int64, Int64, Int64?).self)
            return BacklogSample(
                at: Timestamp.date(unixMilliseconds: at),
                pending: Int(pending),
                dead: Int(dead),
                oldestPendingAgeSeconds: age.map(Int.init)
            )
        }
    }

    public func purgeReportCheckpoint() async throws -> PurgeReportCheckpoint? {
        let rows = try await database.rows(
            "purge report checkpoint read failed",
            "SELECT from_seq, through_seq, head_hash, verified_at, tallies FROM purge_report_checkpoint WHERE id = 1"
        )
        guard let row = rows.first else { return nil }
        let (from, through, hash, verifiedAt, tallies) = try decode(row, (Int64, Int64, Data, Int64, Data).self)
        return PurgeReportCheckpoint(
            fromSequence: from,
            through: AuditHead(sequence: through, hash: [UInt8](hash)),
            verifiedAt: Timestamp.date(unixMilliseconds: verifiedAt),
            tallies: [UInt8](tallies)
        )
    }

    public func recordPurgeReportCheckpoint(_ checkpoint: PurgeReportCheckpoint) async throws {
        try requireWritable()
        _ = try await database.rows(
            "recording the purge report checkpoint failed",
            """
            INSERT INTO purge_report_checkpoint (id, from_seq, through_seq, head_hash, verified_at, tallies)
            VALUES (1, \(checkpoint.fromSequence), \(checkpoint.through.sequence), \(Data(checkpoint.through.hash)),
                \(Self.ms(checkpoint.verifiedAt)), \(Data(checkpoint.tallies)))
            ON CONFLICT (id) DO UPDATE SET from_seq = excluded.from_seq, through_seq = excluded.through_seq,
                head_hash = excluded.head_hash, verified_at = excluded.verified_at, tallies = excluded.tallies
            WHERE excluded.through_seq > purge_report_checkpoint.through_seq
                OR excluded.from_seq <> purge_report_checkpoint.from_seq
            """
        )
    }
}
