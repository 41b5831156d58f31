public import EscrowCore
import EscrowCrypto
import Foundation

/// What `audit verify` found: each segment alone, the segments as one chain, and, with a store, that they end where
/// the store's chain begins (its checkpoint) and that the store's chain verifies from there to its head.
public struct AuditArchiveVerification: Sendable {
    public struct Segment: Sendable, Equatable {
        public var path: String
        public var firstSequence: Int64?
        public var lastSequence: Int64?
        public var count: Int64
        public var redacted: Bool
        public var intact: Bool
    }

    public var segments: [Segment] = []
    /// Every problem, each naming the file, line, sequence or cut; empty when everything verifies.
    public var problems: [String] = []
    /// Facts an auditor should know that are not problems (where the verified history starts).
    public var notes: [String] = []
    /// The store's newest checkpoint, when a store was given.
    public var checkpoint: AuditCheckpoint?
    /// The store's chain from the checkpoint to its head, when a store was given.
    public var storeChain: PurgeReport.Chain?

    public var isIntact: Bool { problems.isEmpty }

    /// The segments' first and last sequences, when they verify as one chain.
    public var coveredSequences: ClosedRange<Int64>? {
        guard let first = segments.first?.firstSequence, let last = segments.last?.lastSequence, first <= last
        else { return nil }
        return first...last
    }

    /// Verifies `paths` as consecutive segments (sorted by their first sequence; a list given out of order is named),
    /// streaming each file. With `store`: the segments must contain every checkpoint the store recorded from their
    /// start on, and end at its newest one; with `verifyStore`, the store's chain is verified from that checkpoint to
    /// its head too; without it (a report over a period), segments missing at either end are only noted.
    /// `onEvent` sees each intact event of the segments, in order.
    public static func verify(
        paths: [String],
        store: (any AuditTrailStore)?,
        verifyStore: Bool = true,
        onEvent: ((AuditEvent) -> Void)? = nil
    ) async throws -> AuditArchiveVerification {
        var result = AuditArchiveVerification()
        let checkpoints = try await store?.auditCheckpoints() ?? []
        result.checkpoint = checkpoints.last
        // The headers first (one line each): the order and the gaps are judged on what the segments say they hold.
        // Each file stays open from its first line on: a pipe (`<(zstd -dc …)`) can be read only once.
        var headers: [(path: String, first: Int64?)] = []
        var readers: [String: (reader: LineReader, first: ArraySlice<UInt8>?)] = [:]
        defer { for (reader, _) in readers.values { reader.close() } }
        for path in paths {
            if let known = headers.first(where: { $0.path == path }) {
                headers.append(known)
                continue
            }
            var reader = try LineReader(path: path)
            let line = try reader.next()
            readers[path] = (reader, line.map { ArraySlice(Array($0)) })
            let peek = AuditSegmentVerifier(name: path)
            if let line { peek.consume(line) }
            headers.append((path, peek.header?.firstSequence))
        }
        let ordered = headers.enumerated().sorted {
            ($0.element.first ?? .max, $0.offset) < ($1.element.first ?? .max, $1.offset)
        }
        if let index = headers.indices.dropLast().first(where: {
            (headers[$0].first ?? 0) > (headers[$0 + 1].first ?? 0)
        }) {
            let (path, first) = headers[index]
            let (next, nextFirst) = headers[index + 1]
            result.problems.append(
                "\(path): given out of order: it holds sequences from \(first ?? 0), and \(next), given after it, "
                    + "from \(nextFirst ?? 0) (verified in sequence order)"
            )
        }
        var previous: AuditSegmentVerifier?
        // Where one segment may join another: each start, and the end of the segment before.
        let joints = Set(headers.compactMap { $0.first.map { $0 - 1 } })
        var emittedThrough: Int64 = 0
        for entry in ordered.map(\.element) {
            let verifier = AuditSegmentVerifier(name: entry.path)
            verifier.watched = Set(checkpoints.map(\.sequence)).union(joints)
            if let previous { verifier.watched.insert(previous.lastSequence) }
            // The same file given twice is read again from its start.
            var (reader, first) = try readers.removeValue(forKey: entry.path) ?? (LineReader(path: entry.path), nil)
            defer { reader.close() }
            var pending = first
            while let line = try pending ?? reader.next() {
                pending = nil
                // A repeat of the segment before is verified, and counted once.
                if let event = verifier.consume(line), event.sequence > emittedThrough {
                    onEvent?(event)
                    emittedThrough = event.sequence
                }
            }
            verifier.finish()
            if let failure = verifier.failure { result.problems.append(failure) }
            if let previous, let header = verifier.header, let before = previous.header {
                result.join(verifier, header, after: previous, before)
            }
            result.segments.append(
                Segment(
                    path: entry.path,
                    firstSequence: verifier.header?.firstSequence,
                    lastSequence: verifier.header == nil ? nil : verifier.lastSequence,
                    count: verifier.count,
                    redacted: verifier.header?.redacted ?? false,
                    intact: verifier.isIntact
                )
            )
            result.check(checkpoints, against: verifier)
            previous = verifier
        }
        if let first = result.segments.first?.firstSequence, first > 1 {
            result.notes.append(
                "the segments start at sequence \(first): events before it were not given and are not verified"
            )
        }
        if let store {
            try await result.checkStore(store, checkpoints: checkpoints, last: previous, verify: verifyStore)
        }
        return result
    }

    /// Judges how `segment` follows `previous`: right after its end, chained from its last hash; or repeating its end
    /// with the same events (an archive run again from a checkpoint inside it: interrupted, or after a restore).
    private mutating func join(
        _ segment: AuditSegmentVerifier,
        _ header: AuditSegment.Header,
        after previous: AuditSegmentVerifier,
        _ previousHeader: AuditSegment.Header
    ) {
        let end = previous.lastSequence
        let name = segment.name
        if header.firstSequence > end + 1 {
            problems.append(
                "\(name): starts at sequence \(header.firstSequence) but \(previous.name) ends at \(end): "
                    + "sequences \(end + 1)-\(header.firstSequence - 1) are in no segment given (a segment dropped)"
            )
            return
        }
        let joint = header.firstSequence - 1
        let hashThere =
            joint == previousHeader.firstSequence - 1 ? previousHeader.previousHash : previous.watchedHashes[joint]
        guard let hashThere, Hashing.constantTimeEqual(header.previousHash, hashThere) else {
            problems.append(
                "\(name): line 1: does not chain from \(previous.name) at sequence \(joint) (its prev_hash is not "
                    + "that event's hash)"
            )
            return
        }
        guard joint < end else { return }
        if segment.lastSequence < end {
            problems.append(
                "\(name): sequences \(header.firstSequence)-\(segment.lastSequence) lie inside \(previous.name): "
                    + "a part of a segment given again"
            )
        } else if !Hashing.constantTimeEqual(segment.watchedHashes[end] ?? [], previous.lastHash) {
            problems.append(
                "\(name): repeats sequences \(header.firstSequence)-\(end) of \(previous.name) with other events "
                    + "(two different histories)"
            )
        } else {
            notes.append(
                "\(name) repeats sequences \(header.firstSequence)-\(end) of \(previous.name), identical (an archive run "
                    + "again from a checkpoint inside it: interrupted, or after a restore); they are counted once"
            )
        }
    }

    /// Every checkpoint the store recorded inside this segment must be one of its events, with the same hash.
    private mutating func check(_ checkpoints: [AuditCheckpoint], against verifier: AuditSegmentVerifier) {
        guard let header = verifier.header, verifier.failure == nil else { return }
        for checkpoint in checkpoints where checkpoint.sequence >= header.firstSequence - 1 {
            if checkpoint.sequence == header.firstSequence - 1 {
                if !Hashing.constantTimeEqual(header.previousHash, checkpoint.hash) {
                    problems.append(
                        "\(verifier.name): line 1: chains from a hash that is not the store's checkpoint at sequence "
                            + "\(checkpoint.sequence)"
                    )
                }
            } else if checkpoint.sequence <= verifier.lastSequence {
                let seen = verifier.watchedHashes[checkpoint.sequence] ?? []
                if !Hashing.constantTimeEqual(seen, checkpoint.hash) {
                    problems.append(
                        "\(verifier.name): sequence \(checkpoint.sequence): its hash is not the one the store recorded "
                            + "for the cut ending there"
                    )
                }
            }
        }
    }

    private mutating func checkStore(
        _ store: any AuditTrailStore,
        checkpoints: [AuditCheckpoint],
        last: AuditSegmentVerifier?,
        verify: Bool
    ) async throws {
        let checkpoint = checkpoints.last
        // Segments missing at either end are a problem for a whole-history check; a report over a period names the
        // archived events it could not count instead (``PurgeReport/ArchiveCoverage``).
        var missing: [String] = []
        if let first = segments.first?.firstSequence,
            let earliest = checkpoints.first?.firstSequence, earliest < first
        {
            missing.append(
                "the store archived sequences \(earliest)-\(first - 1), which are in none of the segments given "
                    + "(a segment dropped)"
            )
        }
        defer { if verify { problems += missing } else { notes += missing } }
        if let last, last.header != nil {
            let end = last.lastSequence
            let storeStart = checkpoint?.sequence ?? 0
            if end < storeStart {
                missing.append(
                    "the segments end at sequence \(end) but the store's checkpoint is at \(storeStart): the "
                        + "segment(s) of sequences \(end + 1)-\(storeStart) are missing"
                )
            } else if end == storeStart {
                if let checkpoint, Hashing.constantTimeEqual(last.lastHash, checkpoint.hash) {
                    notes.append("the segments chain into the store's checkpoint at sequence \(end)")
                }
            } else {
                // The store still holds the segments' last events: restored from a backup taken before the cut, or a
                // cut whose transaction did not complete.
                let stored = try await store.auditEvents(after: end - 1, limit: 1).first
                if let stored, stored.sequence == end, Hashing.constantTimeEqual(stored.hash, last.lastHash) {
                    notes.append(
                        "the store's checkpoint (\(storeStart)) is before the segments' end (\(end)), and the store "
                            + "still holds sequence \(end) with the same hash: a store restored from a backup taken "
                            + "before the cut, or a cut that did not complete; archiving again cuts from \(storeStart + 1)"
                    )
                } else {
                    problems.append(
                        "the segments end at sequence \(end), after the store's checkpoint (\(storeStart)), and the "
                            + "store's event \(end) is \(stored?.sequence == end ? "different" : "missing"): "
                            + "the segments are not of this store's chain"
                    )
                }
            }
        }
        guard verify else { return }
        let chain = try await PurgeReport.verifyStoreChain(store, from: checkpoint)
        storeChain = chain
        if !chain.verified {
            problems.append(
                "the store's chain is broken at sequence \(chain.firstBrokenSequence.map(String.init) ?? "?") "
                    + "(verified from \(checkpoint.map { "the checkpoint at sequence \($0.sequence)" } ?? "the genesis"))"
            )
        }
    }
}
