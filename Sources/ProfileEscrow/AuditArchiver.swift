public import EscrowCore
import EscrowCrypto
public import Foundation

/// What `audit archive` did.
public struct AuditArchiveResult: Sendable, Equatable {
    public var plan: AuditArchivePlan
    /// The cut's checkpoint; nil when there was nothing to archive (no file is written then).
    public var checkpoint: AuditCheckpoint?
    /// Events written with their blind-index prefix although prefixes were to be redacted (v1-encoded events).
    public var prefixesKept: Int
    /// The longest of the transactions that deleted the events (on SQLite, the longest captures waited for the write
    /// lock).
    public var commitSeconds: Double = 0
    /// How many transactions deleted the events (one a chunk, each recording its checkpoint).
    public var transactions: Int = 0
}

/// Moves the oldest audit events out of the store into a segment file, never losing one: the segment is written and
/// made durable under its final name before the transaction that deletes its events and records the checkpoint.
///
/// 1. Plan the cut (``EscrowStore/planAuditArchive(before:)``): a prefix of the chain.
/// 2. Stream its events, a page at a time, into `<out>.partial`, checking every hash; fsync the file.
/// 3. Link it to `<out>` (never over an existing file), remove the partial name, fsync the folder.
/// 4. Transactions of `chunk` events each delete the events in order, each recording the checkpoint of its last
///    event; the last one also appends an `audit-archived` event. Writers wait for one chunk at most.
///
/// A crash before 3 leaves a `.partial` file and the store untouched. A crash after 3 leaves a complete segment
/// whose events from the store's checkpoint on are still in the store (`audit verify --database` says so): a copy,
/// never a loss. Archiving again writes a new segment from the checkpoint, which repeats the end of this one with
/// the same events and hashes (`audit verify` accepts such a repeat when it is identical).
public enum AuditArchiver {
    /// The events one transaction deletes by default: on SQLite, captures wait for the write lock while it runs
    /// (about 0.1 s for 25,000 events, `docs/performance.md`), well within their 5 s bound.
    public static let defaultChunk = 25_000

    public static func archive(
        store: any AuditTrailStore,
        before time: Date,
        to path: String,
        redactPrefixes: Bool,
        actor: AuditActor,
        now: Date = Date(),
        pageSize: Int = 10_000,
        chunk: Int = defaultChunk
    ) async throws -> AuditArchiveResult {
        guard !FileManager.default.fileExists(atPath: path) else {
            throw AuditSegmentError("\(path) exists: a segment is never overwritten; choose another --out")
        }
        let plan = try await store.planAuditArchive(before: time)
        guard !plan.isEmpty else { return AuditArchiveResult(plan: plan, checkpoint: nil, prefixesKept: 0) }
        let encoder = AuditSegmentEncoder(
            header: AuditSegment.Header(
                firstSequence: plan.firstSequence,
                previousHash: plan.previousHash,
                createdAt: Timestamp.unixMilliseconds(now),
                before: Timestamp.unixMilliseconds(time),
                redacted: redactPrefixes
            )
        )
        // The checkpoint of each chunk, made as its last event is written: the chunks are deleted one transaction
        // each, after the whole segment is durable.
        var chunks: [AuditCheckpoint] = []
        var chunkStart = plan.firstSequence
        var chunkEarliest = Int64.max
        var chunkLatest = Int64.min
        let chunkSize = Int64(max(1, chunk))
        let partial = path + ".partial"
        let file = try SegmentFile(creating: partial)
        do {
            try file.write(encoder.headerLine())
            var buffer: [UInt8] = []
            buffer.reserveCapacity(1 << 20)
            var cursor = plan.firstSequence - 1
            while cursor < plan.lastSequence {
                let page = try await store.auditEvents(
                    after: cursor,
                    limit: Int(min(Int64(pageSize), plan.lastSequence - cursor))
                )
                guard let last = page.last else { break }
                for event in page where event.sequence <= plan.lastSequence {
                    buffer += try encoder.line(for: event)
                    let at = Timestamp.unixMilliseconds(event.draft.at)
                    chunkEarliest = min(chunkEarliest, at)
                    chunkLatest = max(chunkLatest, at)
                    if event.sequence - chunkStart + 1 == chunkSize || event.sequence == plan.lastSequence {
                        chunks.append(
                            AuditCheckpoint(
                                sequence: event.sequence,
                                hash: event.hash,
                                firstSequence: chunkStart,
                                eventCount: event.sequence - chunkStart + 1,
                                earliestAt: chunkEarliest,
                                latestAt: chunkLatest,
                                archivedAt: Timestamp.unixMilliseconds(now)
                            )
                        )
                        chunkStart = event.sequence + 1
                        chunkEarliest = .max
                        chunkLatest = .min
                    }
                }
                cursor = last.sequence
                if buffer.count >= 1 << 20 {
                    try file.write(buffer)
                    buffer.removeAll(keepingCapacity: true)
                }
            }
            guard encoder.nextSequence - 1 == plan.lastSequence else {
                throw AuditSegmentError(
                    "the store holds events only up to sequence \(encoder.nextSequence - 1) of the cut's "
                        + "\(plan.lastSequence) (another archive ran meanwhile?); nothing archived"
                )
            }
            buffer += encoder.trailerLine()
            try file.write(buffer)
            try file.sync()
            file.close()
            try SegmentFile.publish(partial, as: path)
        } catch {
            file.close()
            try? FileManager.default.removeItem(atPath: partial)
            throw error
        }
        let checkpoint = encoder.checkpoint(of: plan, archivedAt: Timestamp.unixMilliseconds(now))
        let event = AuditDraft(
            type: .auditArchived,
            at: now,
            detail: "\(checkpoint.firstSequence)-\(checkpoint.sequence):\(Hex.encode(checkpoint.hash))",
            actor: actor
        )
        var previous = plan.previous
        var longest = Duration.zero
        for (index, chunk) in chunks.enumerated() {
            // Each transaction continues the last; the first checks the whole cut against the live escrows.
            var chunkPlan = AuditArchivePlan(previous: previous, lastSequence: plan.lastSequence, limit: plan.limit)
            chunkPlan.liveEscrowsChecked = index > 0
            let isLast = index == chunks.count - 1
            let started = ContinuousClock.now
            try await commit(chunkPlan, chunk, audit: isLast ? [event] : [], store: store, path: path)
            longest = max(longest, ContinuousClock.now - started)
            previous = chunk
        }
        return AuditArchiveResult(
            plan: plan,
            checkpoint: checkpoint,
            prefixesKept: encoder.prefixesKept,
            commitSeconds: Double(longest.components.seconds) + Double(longest.components.attoseconds) / 1e18,
            transactions: chunks.count
        )
    }

    /// One chunk's transaction, tried again while the store is busy (another writer held it past its bound).
    private static func commit(
        _ plan: AuditArchivePlan,
        _ checkpoint: AuditCheckpoint,
        audit: [AuditDraft],
        store: any AuditTrailStore,
        path: String
    ) async throws {
        var attempt = 0
        while true {
            attempt += 1
            do {
                try await store.commitAuditArchive(plan, checkpoint: checkpoint, audit: audit)
                return
            } catch {
                // The segment stays: it is a verified copy of events the store may still hold (an outcome that is
                // not known, a lost connection during the commit, must never lose the only copy of deleted events).
                guard let error = error as? EscrowStoreError else { throw error }
                if error.code == .busy, attempt < 5 { continue }
                throw EscrowStoreError(
                    error.code,
                    error.message + "; the segment \(path) is complete and the store's events up to sequence "
                        + "\(plan.firstSequence - 1) are deleted: `audit verify \(path) --database …` shows where the "
                        + "store stands, and `audit archive` run again (another --out) cuts the rest"
                )
            }
        }
    }
}

/// A segment file being written: created new (never over an existing file), owner-only, appended to, synced.
final class SegmentFile {
    private let descriptor: Int32
    private let path: String
    private var closed = false

    init(creating path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw AuditSegmentError("\(path): cannot be created (\(String(cString: strerror(errno))))")
        }
        self.descriptor = descriptor
        self.path = path
    }

    func write(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Foundation.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw AuditSegmentError("\(path): write failed (\(String(cString: strerror(errno))))")
                }
                offset += written
            }
        }
    }

    func sync() throws {
        guard fsync(descriptor) == 0 else {
            throw AuditSegmentError("\(path): fsync failed (\(String(cString: strerror(errno))))")
        }
    }

    func close() {
        guard !closed else { return }
        closed = true
        _ = Foundation.close(descriptor)
    }

    /// Gives the synced file at `partial` its final name `path` without ever replacing a file there (a hard link, then
    /// the partial name removed), then syncs the folder so that the name survives a power cut.
    static func publish(_ partial: String, as path: String) throws {
        guard link(partial, path) == 0 else {
            throw AuditSegmentError("\(path): cannot be created (\(String(cString: strerror(errno))))")
        }
        _ = unlink(partial)
        let folder = (path as NSString).deletingLastPathComponent
        let directory = open(folder.isEmpty ? "." : folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else {
            throw AuditSegmentError("\(folder): cannot be opened to sync (\(String(cString: strerror(errno))))")
        }
        defer { _ = Foundation.close(directory) }
        guard fsync(directory) == 0 else {
            throw AuditSegmentError("\(folder): fsync failed (\(String(cString: strerror(errno))))")
        }
    }
}
