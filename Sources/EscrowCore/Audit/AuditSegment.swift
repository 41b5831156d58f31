internal import EscrowCrypto
internal import Foundation

/// An archived cut of the audit chain: a file of JSON lines that verifies on its own (`docs/FORMAT.md`, "Audit
/// segment"). A header line, one line an event with its hash and the hash it chains from, and a trailer line with the
/// last sequence and hash, the count, and a hash over every byte before it.
public enum AuditSegment {
    /// The header's `format`.
    public static let format = "profile-escrow-audit-segment"
    /// The header's `version`.
    public static let version: Int64 = 1

    public struct Header: Sendable, Equatable {
        /// The first event's sequence.
        public var firstSequence: Int64
        /// The hash the first event chains from: the previous segment's last hash, or the genesis (32 zero bytes).
        public var previousHash: [UInt8]
        /// When the segment was written (milliseconds since 1970).
        public var createdAt: Int64
        /// The cut's time: every event is before it (milliseconds since 1970).
        public var before: Int64
        /// Whether the blind-index prefixes were replaced by their commitments.
        public var redacted: Bool

        public init(firstSequence: Int64, previousHash: [UInt8], createdAt: Int64, before: Int64, redacted: Bool) {
            self.firstSequence = firstSequence
            self.previousHash = previousHash
            self.createdAt = createdAt
            self.before = before
            self.redacted = redacted
        }
    }

    public struct Trailer: Sendable, Equatable {
        public var lastSequence: Int64
        public var lastHash: [UInt8]
        public var count: Int64
        /// BLAKE2b-256 of every byte of the file before the trailer line.
        public var fileHash: [UInt8]
    }
}

/// A segment that cannot be written: the store's chain is broken where the archive read it.
public struct AuditSegmentError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Writes a segment's lines as the events stream past, checking that each continues the chain (a broken chain is
/// never archived), and hashing the file as it goes. Memory does not depend on the number of events.
public final class AuditSegmentEncoder {
    public let header: AuditSegment.Header
    private let fileHash = Blake2bStream()
    public private(set) var lastHash: [UInt8]
    public private(set) var nextSequence: Int64
    public private(set) var count: Int64 = 0
    public private(set) var earliestAt = Int64.max
    public private(set) var latestAt = Int64.min
    /// Events written with their prefix although the segment is redacted: events of the v1 encoding, which hashed the
    /// prefix itself.
    public private(set) var prefixesKept = 0

    public init(header: AuditSegment.Header) {
        self.header = header
        self.lastHash = header.previousHash
        self.nextSequence = header.firstSequence
    }

    public func headerLine() -> [UInt8] {
        var writer = CanonicalJSONWriter(sink: CanonicalJSONArraySink(capacity: 256))
        writer.beginObject()
        writer.key("format")
        writer.string(AuditSegment.format)
        writer.key("version")
        writer.integer(AuditSegment.version)
        writer.key("first_seq")
        writer.integer(header.firstSequence)
        writer.key("prev_hash")
        writer.string(Hex.encode(header.previousHash))
        writer.key("created_at")
        writer.string(Timestamp.milliseconds(Timestamp.date(unixMilliseconds: header.createdAt)))
        writer.key("before")
        writer.string(Timestamp.milliseconds(Timestamp.date(unixMilliseconds: header.before)))
        writer.key("prefixes")
        writer.string(header.redacted ? "redacted" : "kept")
        writer.endObject()
        return finishLine(writer.sink.bytes)
    }

    /// The line of the next event; throws when it does not continue the chain.
    public func line(for event: AuditEvent) throws(AuditSegmentError) -> [UInt8] {
        guard event.sequence == nextSequence else {
            throw AuditSegmentError(
                "the store's chain is broken: sequence \(event.sequence) follows \(nextSequence - 1); nothing archived"
            )
        }
        let recomputed = AuditChain.hash(
            previous: lastHash,
            sequence: event.sequence,
            draft: event.draft,
            encoding: event.encoding
        )
        guard Hashing.constantTimeEqual(recomputed, event.hash) else {
            throw AuditSegmentError(
                "the store's chain is broken at sequence \(event.sequence) (its hash does not match); nothing archived"
            )
        }
        let draft = event.draft
        let at = Timestamp.unixMilliseconds(draft.at)
        var writer = CanonicalJSONWriter(sink: CanonicalJSONArraySink(capacity: 384))
        writer.beginObject()
        writer.key("seq")
        writer.integer(event.sequence)
        writer.key("enc")
        writer.integer(Int64(event.encoding.rawValue))
        writer.key("at")
        writer.integer(at)
        writer.key("type")
        writer.string(draft.type.rawValue)
        writer.key("escrow_id")
        writer.stringOrNull(draft.escrowID)
        if header.redacted, event.encoding.commitsToPrefix {
            writer.key("prefix_commitment")
            writer.stringOrNull(
                draft.indexPrefix.map { AuditChain.prefixCommitment(escrowID: draft.escrowID, indexPrefix: $0) }
            )
        } else {
            if header.redacted, draft.indexPrefix != nil { prefixesKept += 1 }
            writer.key("prefix")
            writer.stringOrNull(draft.indexPrefix)
        }
        writer.key("detail")
        writer.stringOrNull(draft.detail)
        writer.key("http_status")
        if let status = draft.httpStatus { writer.integer(Int64(status)) } else { writer.null() }
        writer.key("actor")
        writer.string(draft.actor.rawValue)
        writer.key("age_ms")
        if let age = draft.ageMilliseconds { writer.integer(age) } else { writer.null() }
        if let reason = draft.reason {
            writer.key("reason")
            writer.string(reason)
        }
        writer.key("prev")
        writer.string(Hex.encode(lastHash))
        writer.key("hash")
        writer.string(Hex.encode(event.hash))
        writer.endObject()
        lastHash = event.hash
        nextSequence += 1
        count += 1
        earliestAt = min(earliestAt, at)
        latestAt = max(latestAt, at)
        return finishLine(writer.sink.bytes)
    }

    /// The trailer: the last line. Nothing may be written after it.
    public func trailerLine() -> [UInt8] {
        var writer = CanonicalJSONWriter(sink: CanonicalJSONArraySink(capacity: 256))
        writer.beginObject()
        writer.key("end")
        writer.bool(true)
        writer.key("last_seq")
        writer.integer(nextSequence - 1)
        writer.key("last_hash")
        writer.string(Hex.encode(lastHash))
        writer.key("count")
        writer.integer(count)
        writer.key("file_hash")
        writer.string(Hex.encode(fileHash.finish()))
        writer.endObject()
        var bytes = writer.sink.bytes
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    private func finishLine(_ bytes: [UInt8]) -> [UInt8] {
        var bytes = bytes
        bytes.append(UInt8(ascii: "\n"))
        fileHash.update(bytes)
        return bytes
    }
}

extension AuditSegmentEncoder {
    /// The checkpoint of a cut whose events this encoder wrote: `plan`'s range, the last hash, the count and the times;
    /// `milliseconds`: when the cut was made (since 1970).
    package func checkpoint(of plan: AuditArchivePlan, archivedAt milliseconds: Int64) -> AuditCheckpoint {
        AuditCheckpoint(
            sequence: plan.lastSequence,
            hash: lastHash,
            firstSequence: plan.firstSequence,
            eventCount: count,
            earliestAt: earliestAt,
            latestAt: latestAt,
            archivedAt: milliseconds
        )
    }
}

/// Verifies one segment file as its lines stream past, on its own: the header, each event's place in the sequence,
/// the hash it chains from and its own hash recomputed from its fields, and the trailer (count, last hash, and the
/// hash of the file). The first problem is kept, naming the file, the line and the sequence.
public final class AuditSegmentVerifier {
    public let name: String
    public private(set) var header: AuditSegment.Header?
    public private(set) var trailer: AuditSegment.Trailer?
    /// The first problem found; nil while the segment verifies.
    public private(set) var failure: String?
    public private(set) var count: Int64 = 0
    /// The hash of the last event read (the header's previous hash before any).
    public private(set) var lastHash: [UInt8] = []
    /// The sequence of the last event read.
    public private(set) var lastSequence: Int64 = 0
    /// Sequences whose hash to remember as they pass (a store's checkpoint inside the segment), and what was seen.
    public var watched: Set<Int64> = []
    public private(set) var watchedHashes: [Int64: [UInt8]] = [:]
    private var lineNumber = 0
    private let fileHash = Blake2bStream()

    public init(name: String) {
        self.name = name
    }

    public var isIntact: Bool { failure == nil && trailer != nil }

    /// Takes the next line, without its newline; returns the event it holds when it is an intact event line.
    @discardableResult
    public func consume(_ line: ArraySlice<UInt8>) -> AuditEvent? {
        lineNumber += 1
        guard failure == nil else { return nil }
        guard trailer == nil else {
            fail("line \(lineNumber): a line after the trailer")
            return nil
        }
        let members: [String: StrictJSON.Value]
        do {
            guard case .object(let object) = try StrictJSON.parse(line) else {
                fail("line \(lineNumber): not a JSON object")
                return nil
            }
            members = Dictionary(object.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
        } catch {
            fail("line \(lineNumber): not JSON (\(error.code))")
            return nil
        }
        if lineNumber == 1 {
            readHeader(members)
        } else if members["end"] != nil {
            readTrailer(members)
        } else {
            let event = readEvent(members)
            if event != nil { fileHash.update(line + [UInt8(ascii: "\n")]) }
            return event
        }
        if lineNumber == 1, failure == nil { fileHash.update(line + [UInt8(ascii: "\n")]) }
        return nil
    }

    /// Call after the last line: a segment without its trailer was cut short.
    public func finish() {
        guard failure == nil, trailer == nil else { return }
        if header == nil {
            fail("empty: no header line")
        } else {
            fail(
                "no trailer after line \(lineNumber) (sequence \(lastSequence)): the segment was cut short, "
                    + "its last lines are missing"
            )
        }
    }

    private func fail(_ message: String) {
        if failure == nil { failure = "\(name): \(message)" }
    }

    private func readHeader(_ members: [String: StrictJSON.Value]) {
        guard members.string("format") == AuditSegment.format else {
            fail("line 1: not an audit segment header (no format \"\(AuditSegment.format)\")")
            return
        }
        guard members.integer("version") == AuditSegment.version else {
            fail("line 1: segment version \(members.integer("version").map(String.init) ?? "?") is not known")
            return
        }
        guard let first = members.integer("first_seq"), first >= 1,
            let previous = members.string("prev_hash").flatMap(Hex.decode), previous.count == 32,
            let redaction = members.string("prefixes"), redaction == "kept" || redaction == "redacted"
        else {
            fail("line 1: the header lacks first_seq, prev_hash or prefixes")
            return
        }
        if first == 1, previous != AuditChain.genesis {
            fail("line 1: sequence 1 must chain from the genesis (32 zero bytes)")
            return
        }
        header = AuditSegment.Header(
            firstSequence: first,
            previousHash: previous,
            createdAt: 0,
            before: 0,
            redacted: redaction == "redacted"
        )
        lastHash = previous
        lastSequence = first - 1
    }

    private func readEvent(_ members: [String: StrictJSON.Value]) -> AuditEvent? {
        guard let sequence = members.integer("seq") else {
            fail("line \(lineNumber): an event line without its sequence")
            return nil
        }
        let place = "line \(lineNumber) (sequence \(sequence))"
        guard sequence == lastSequence + 1 else {
            fail(
                "\(place): sequence \(lastSequence + 1) was expected after \(lastSequence): "
                    + (sequence <= lastSequence
                        ? "lines reordered or repeated" : "events \(lastSequence + 1)-\(sequence - 1) dropped or moved")
            )
            return nil
        }
        guard let encoding = members.integer("enc").flatMap({ AuditEncoding(rawValue: Int($0)) }),
            let at = members.integer("at"),
            let type = members.string("type"),
            let actor = members.string("actor"),
            let claimed = members.string("hash").flatMap(Hex.decode),
            let previous = members.string("prev").flatMap(Hex.decode)
        else {
            fail("\(place): an event line lacks enc, at, type, actor, prev or hash")
            return nil
        }
        guard Hashing.constantTimeEqual(previous, lastHash) else {
            fail(
                "\(place): does not chain from the line before it (its prev is not that event's hash): "
                    + "the event before it was altered, or lines were reordered"
            )
            return nil
        }
        let draft = AuditDraft(
            type: AuditEventType(rawValue: type),
            at: Timestamp.date(unixMilliseconds: at),
            escrowID: members.string("escrow_id"),
            indexPrefix: members.string("prefix"),
            detail: members.string("detail"),
            httpStatus: members.integer("http_status").map { Int(truncatingIfNeeded: $0) },
            actor: AuditActor(rawValue: actor),
            ageMilliseconds: members.integer("age_ms"),
            reason: members.string("reason")
        )
        let recomputed: [UInt8]
        if members["prefix_commitment"] != nil {
            guard encoding.commitsToPrefix else {
                fail("\(place): a v1 event cannot carry a prefix commitment")
                return nil
            }
            recomputed = AuditChain.hash(
                previous: lastHash,
                sequence: sequence,
                draft: draft,
                prefixCommitment: members.string("prefix_commitment"),
                encoding: encoding
            )
        } else {
            recomputed = AuditChain.hash(previous: lastHash, sequence: sequence, draft: draft, encoding: encoding)
        }
        guard Hashing.constantTimeEqual(recomputed, claimed) else {
            fail("\(place): its content does not match its hash: the event was altered")
            return nil
        }
        lastHash = claimed
        lastSequence = sequence
        count += 1
        if watched.contains(sequence) { watchedHashes[sequence] = claimed }
        return AuditEvent(sequence: sequence, draft: draft, hash: claimed, encoding: encoding)
    }

    private func readTrailer(_ members: [String: StrictJSON.Value]) {
        guard let last = members.integer("last_seq"),
            let lastHash = members.string("last_hash").flatMap(Hex.decode),
            let count = members.integer("count"),
            let fileHash = members.string("file_hash").flatMap(Hex.decode)
        else {
            fail("line \(lineNumber): the trailer lacks last_seq, last_hash, count or file_hash")
            return
        }
        let place = "line \(lineNumber) (trailer)"
        guard last == lastSequence, count == self.count else {
            fail(
                "\(place): says \(count) events up to sequence \(last), the segment holds \(self.count) up to "
                    + "\(lastSequence): events dropped or added"
            )
            return
        }
        guard Hashing.constantTimeEqual(lastHash, self.lastHash) else {
            fail("\(place): its last hash is not the last event's")
            return
        }
        guard Hashing.constantTimeEqual(fileHash, self.fileHash.finish()) else {
            fail("\(place): the file hash does not match: the header or a line was altered")
            return
        }
        trailer = AuditSegment.Trailer(lastSequence: last, lastHash: lastHash, count: count, fileHash: fileHash)
    }
}

extension [String: StrictJSON.Value] {
    fileprivate func string(_ key: String) -> String? {
        if case .string(let value) = self[key] { return value }
        return nil
    }

    fileprivate func integer(_ key: String) -> Int64? {
        if case .number(let text) = self[key] { return Int64(text) }
        return nil
    }
}

/// Splits a file into lines as it is read, a megabyte at a time: memory does not depend on the file's size.
public struct LineReader {
    private let handle: FileHandle
    private var buffer: [UInt8] = []
    private var start = 0
    private var atEnd = false

    public init(path: String) throws {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw AuditSegmentError("\(path): cannot be opened for reading")
        }
        self.handle = handle
    }

    /// The next line without its newline; nil at the end of the file.
    public mutating func next() throws -> ArraySlice<UInt8>? {
        while true {
            if let newline = buffer[start...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = buffer[start..<newline]
                start = newline + 1
                return line
            }
            if atEnd {
                guard start < buffer.count else { return nil }
                let line = buffer[start...]
                start = buffer.count
                return line
            }
            buffer.removeFirst(start)
            start = 0
            let chunk = try handle.read(upToCount: 1 << 20) ?? Data()
            if chunk.isEmpty { atEnd = true } else { buffer.append(contentsOf: chunk) }
        }
    }

    public func close() {
        try? handle.close()
    }
}
