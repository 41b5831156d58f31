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

    /// The chain hash of `draft` stored at `sequence` after an event whose hash is `previous`, in `encoding`
    /// (``AuditEncoding/v1`` unless given: the encoding of every event before the v2 one existed).
    public static func hash(
        previous: [UInt8],
        sequence: Int64,
        draft: AuditDraft,
        encoding: AuditEncoding = .v1
    ) -> [UInt8] {
        // One buffer, `previous` then the canonical bytes, hashed once: a report verifies a million of these.
        var input = [UInt8]()
        input.reserveCapacity(previous.count + 192)
        input.append(contentsOf: previous)
        appendCanonical(sequence: sequence, draft: draft, encoding: encoding, to: &input)
        return Hashing.blake2b256(input)
    }

    /// The chain hash of an event whose blind-index prefix is known only by its commitment (a redacted archive
    /// line): only a ``AuditEncoding/v2`` event hashes the commitment rather than the prefix.
    public static func hash(
        previous: [UInt8],
        sequence: Int64,
        draft: AuditDraft,
        prefixCommitment: String?,
        encoding: AuditEncoding = .v2
    ) -> [UInt8] {
        precondition(encoding != .v1, "v1 hashes the prefix itself, not a commitment")
        var input = [UInt8]()
        input.reserveCapacity(previous.count + 224)
        input.append(contentsOf: previous)
        if encoding == .v3 {
            appendFields(sequence: sequence, draft: draft, magic: magicV3, prefixField: prefixCommitment, to: &input)
            appendField(draft.reason, to: &input)
        } else {
            appendFields(sequence: sequence, draft: draft, magic: magicV2, prefixField: prefixCommitment, to: &input)
        }
        return Hashing.blake2b256(input)
    }

    /// The canonical bytes of one event.
    public static func canonical(sequence: Int64, draft: AuditDraft, encoding: AuditEncoding = .v1) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(192)
        appendCanonical(sequence: sequence, draft: draft, encoding: encoding, to: &out)
        return out
    }

    /// What a ``AuditEncoding/v2`` event hashes in place of its blind-index prefix: the hex of
    /// `BLAKE2b-256("pe-prefix-2" || u32 length || escrow id || u32 length || prefix)`. Bound to the escrow id, so two
    /// escrows of one user have unrelated commitments: a redacted archive keeps the chain without the link.
    public static func prefixCommitment(escrowID: String?, indexPrefix: String) -> String {
        var input = Array("pe-prefix-2".utf8)
        appendField(escrowID, to: &input)
        appendField(indexPrefix, to: &input)
        return Hex.encode(Hashing.blake2b256(input))
    }

    private static let magic = Array("pe-audit-1".utf8)
    private static let magicV2 = Array("pe-audit-2".utf8)
    private static let magicV3 = Array("pe-audit-3".utf8)

    /// The magic, then each field as a big-endian `u32` length and its UTF-8 bytes (an absent field is empty),
    /// written straight into `out`. ``AuditEncoding/v2`` has its own magic and the prefix's commitment in place of
    /// the prefix.
    static func appendCanonical(sequence: Int64, draft: AuditDraft, encoding: AuditEncoding, to out: inout [UInt8]) {
        switch encoding {
        case .v1:
            appendFields(sequence: sequence, draft: draft, magic: magic, prefixField: draft.indexPrefix, to: &out)
        case .v2:
            let commitment = draft.indexPrefix.map { prefixCommitment(escrowID: draft.escrowID, indexPrefix: $0) }
            appendFields(sequence: sequence, draft: draft, magic: magicV2, prefixField: commitment, to: &out)
        case .v3:
            let commitment = draft.indexPrefix.map { prefixCommitment(escrowID: draft.escrowID, indexPrefix: $0) }
            appendFields(sequence: sequence, draft: draft, magic: magicV3, prefixField: commitment, to: &out)
            appendField(draft.reason, to: &out)
        }
    }

    private static func appendField(_ value: String?, to out: inout [UInt8]) {
        let utf8 = (value ?? "").utf8
        let count = UInt32(utf8.count)
        out.append(UInt8(truncatingIfNeeded: count >> 24))
        out.append(UInt8(truncatingIfNeeded: count >> 16))
        out.append(UInt8(truncatingIfNeeded: count >> 8))
        out.append(UInt8(truncatingIfNeeded: count))
        out.append(contentsOf: utf8)
    }

    private static func appendFields(
        sequence: Int64,
        draft: AuditDraft,
        magic: [UInt8],
        prefixField: String?,
        to out: inout [UInt8]
    ) {
        out.append(contentsOf: magic)
        // Decimal numbers are short strings: Swift keeps them inline, with no allocation.
        appendField(String(sequence), to: &out)
        appendField(String(Timestamp.unixMilliseconds(draft.at)), to: &out)
        appendField(draft.type.rawValue, to: &out)
        appendField(draft.escrowID, to: &out)
        appendField(prefixField, to: &out)
        appendField(draft.detail, to: &out)
        appendField(draft.httpStatus.map { String($0) }, to: &out)
        appendField(draft.actor.rawValue, to: &out)
        appendField(draft.ageMilliseconds.map { String($0) }, to: &out)
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

        /// Verifies the events after `checkpoint` (the last archived event), chaining from its hash; from the genesis
        /// when there is none.
        public init(from checkpoint: AuditHead?) {
            self.expectedSequence = (checkpoint?.sequence ?? 0) + 1
            self.previous = checkpoint?.hash ?? AuditChain.genesis
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
            let recomputed = AuditChain.hash(
                previous: previous,
                sequence: event.sequence,
                draft: event.draft,
                encoding: event.encoding
            )
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

/// How an event's canonical bytes are laid out (``AuditChain``), stored with each event.
public enum AuditEncoding: Int, Sendable, Equatable, CaseIterable {
    /// `pe-audit-1`: the blind-index prefix itself is hashed.
    case v1 = 1
    /// `pe-audit-2`: a commitment to the prefix (``AuditChain/prefixCommitment(escrowID:indexPrefix:)``) is hashed
    /// instead, so an archive can drop the prefix and still verify. Every event appended since the archive exists.
    case v2 = 2
    /// `pe-audit-3`: v2 and, last, the operator's reason (``AuditDraft/reason``). Every event appended since operator
    /// reasons exist.
    case v3 = 3

    /// The encoding of the events appended now.
    public static let current = AuditEncoding.v3

    /// Whether the prefix is hashed through its commitment (an archive may drop it).
    public var commitsToPrefix: Bool { self != .v1 }
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
