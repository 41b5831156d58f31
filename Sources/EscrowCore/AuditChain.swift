internal import EscrowCrypto
import Foundation

/// The hash chain over audit events.
///
/// `hash(n) = BLAKE2b-256(hash(n-1) || canonical(n))`, with 32 zero bytes before the first event.
/// The canonical encoding is documented in `docs/FORMAT.md`: a magic, then every field as a
/// big-endian `u32` length and its UTF-8 bytes, so no value can be confused with a separator.
public enum AuditChain {
    /// The hash "before" the first event.
    public static let genesis = [UInt8](repeating: 0, count: 32)

    /// The chain hash of `draft` stored at `sequence` after an event whose hash is `previous`.
    public static func hash(previous: [UInt8], sequence: Int64, draft: AuditDraft) -> [UInt8] {
        // One buffer, `previous` then the canonical bytes, hashed once: a report verifies a million of these.
        var input = [UInt8]()
        input.reserveCapacity(previous.count + 192)
        input.append(contentsOf: previous)
        appendCanonical(sequence: sequence, draft: draft, to: &input)
        return Hashing.blake2b256(input)
    }

    /// The canonical bytes of one event.
    public static func canonical(sequence: Int64, draft: AuditDraft) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(192)
        appendCanonical(sequence: sequence, draft: draft, to: &out)
        return out
    }

    private static let magic = Array("pe-audit-1".utf8)

    /// The magic, then each field as a big-endian `u32` length and its UTF-8 bytes (an absent field is empty),
    /// written straight into `out`.
    static func appendCanonical(sequence: Int64, draft: AuditDraft, to out: inout [UInt8]) {
        out.append(contentsOf: magic)
        func field(_ value: String?) {
            let utf8 = (value ?? "").utf8
            let count = UInt32(utf8.count)
            out.append(UInt8(truncatingIfNeeded: count >> 24))
            out.append(UInt8(truncatingIfNeeded: count >> 16))
            out.append(UInt8(truncatingIfNeeded: count >> 8))
            out.append(UInt8(truncatingIfNeeded: count))
            out.append(contentsOf: utf8)
        }
        // Decimal numbers are short strings: Swift keeps them inline, with no allocation.
        field(String(sequence))
        field(String(Timestamp.unixMilliseconds(draft.at)))
        field(draft.type.rawValue)
        field(draft.escrowID)
        field(draft.indexPrefix)
        field(draft.detail)
        field(draft.httpStatus.map { String($0) })
        field(draft.actor.rawValue)
        field(draft.ageMilliseconds.map { String($0) })
    }

    /// Recomputes a chain as its events stream past, and remembers the first broken link.
    public struct Verifier: Sendable {
        public private(set) var previous: [UInt8] = AuditChain.genesis
        public private(set) var expectedSequence: Int64
        public private(set) var eventCount = 0
        /// The first sequence number at which the chain is broken: an edited event, or the
        /// position of a deleted one.
        public private(set) var firstBrokenSequence: Int64?

        /// - Parameter firstSequence: the sequence the chain starts at (1 for a full chain).
        public init(firstSequence: Int64 = 1) {
            self.expectedSequence = firstSequence
        }

        public var isIntact: Bool { firstBrokenSequence == nil }

        public mutating func consume(_ event: AuditEvent) {
            eventCount += 1
            defer {
                previous = event.hash
                expectedSequence = event.sequence + 1
            }
            guard firstBrokenSequence == nil else { return }
            if event.sequence != expectedSequence {
                firstBrokenSequence = expectedSequence
                return
            }
            let recomputed = AuditChain.hash(previous: previous, sequence: event.sequence, draft: event.draft)
            if !Hashing.constantTimeEqual(recomputed, event.hash) {
                firstBrokenSequence = event.sequence
            }
        }

        /// Checks the end of the chain against the recorded head (catches deleted trailing events).
        public mutating func finish(head: AuditHead?) {
            guard firstBrokenSequence == nil else { return }
            let last = expectedSequence - 1
            switch head {
            case nil:
                if eventCount > 0 { firstBrokenSequence = 1 }
            case let head?:
                if head.sequence != last {
                    firstBrokenSequence = min(head.sequence, last) + 1
                } else if !Hashing.constantTimeEqual(head.hash, previous) {
                    firstBrokenSequence = last
                }
            }
        }
    }
}

/// The last sequence number and hash of the chain, kept beside the events so that deleting the
/// newest events is detected too. Auditors can also record it outside the store.
public struct AuditHead: Sendable, Equatable {
    public var sequence: Int64
    public var hash: [UInt8]

    public init(sequence: Int64, hash: [UInt8]) {
        self.sequence = sequence
        self.hash = hash
    }
}
