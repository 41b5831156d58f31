import EscrowCore
import EscrowCrypto
import Foundation
import Testing

@Suite("Audit chain")
struct AuditChainTests {
    static func chain(_ count: Int) -> [AuditEvent] {
        var previous = AuditChain.genesis
        return (1...Int64(count)).map { sequence in
            let draft = AuditDraft(
                type: sequence % 2 == 0 ? .purged : .captured,
                at: Date(timeIntervalSince1970: Double(sequence)),
                escrowID: String(repeating: "a", count: 32),
                indexPrefix: "0011223344556677",
                detail: sequence % 2 == 0 ? "confirmed" : nil,
                actor: .cli,
                ageMilliseconds: sequence % 2 == 0 ? 1000 : nil
            )
            let hash = AuditChain.hash(previous: previous, sequence: sequence, draft: draft)
            previous = hash
            return AuditEvent(sequence: sequence, draft: draft, hash: hash)
        }
    }

    static func verify(_ events: [AuditEvent], head: AuditHead?) -> AuditChain.Verifier {
        var verifier = AuditChain.Verifier()
        for event in events { verifier.consume(event) }
        verifier.finish(head: head)
        return verifier
    }

    static func head(_ events: [AuditEvent]) -> AuditHead? {
        events.last.map { AuditHead(sequence: $0.sequence, hash: $0.hash) }
    }

    @Test func intactChainVerifies() {
        let events = Self.chain(10)
        let verifier = Self.verify(events, head: Self.head(events))
        #expect(verifier.isIntact)
        #expect(verifier.eventCount == 10)
    }

    @Test func hashIsBlake2bOfPreviousAndCanonical() {
        let event = Self.chain(1)[0]
        let expected = Hashing.blake2b256(AuditChain.genesis + AuditChain.canonical(sequence: 1, draft: event.draft))
        #expect(event.hash == expected)
    }

    @Test(arguments: 1...10)
    func anEditedEventIsNamed(position: Int) {
        var events = Self.chain(10)
        let head = Self.head(events)
        events[position - 1].draft.detail = "tampered"
        #expect(Self.verify(events, head: head).firstBrokenSequence == Int64(position))
    }

    @Test(arguments: 1...9)
    func aDeletedEventIsNamed(position: Int) {
        var events = Self.chain(10)
        let head = Self.head(events)
        events.remove(at: position - 1)
        #expect(Self.verify(events, head: head).firstBrokenSequence == Int64(position))
    }

    @Test func aDeletedLastEventIsCaughtByTheHead() {
        var events = Self.chain(10)
        let head = Self.head(events)
        events.removeLast()
        #expect(Self.verify(events, head: head).firstBrokenSequence == 10)
    }

    @Test func fieldsCannotBeShiftedIntoEachOther() {
        // Length prefixes: moving bytes from one field into the next changes the canonical bytes.
        var a = Self.chain(1)[0].draft
        var b = a
        a.escrowID = "ab"
        a.indexPrefix = "c"
        b.escrowID = "a"
        b.indexPrefix = "bc"
        #expect(AuditChain.canonical(sequence: 1, draft: a) != AuditChain.canonical(sequence: 1, draft: b))
    }

    /// Known answers, computed by an independent implementation of docs/FORMAT.md (Python's hashlib): the
    /// canonical bytes and chain hashes of two events after a previous hash of 32 bytes 0x01.
    @Test func knownAnswers() {
        let previous = [UInt8](repeating: 1, count: 32)
        let purged = AuditDraft(
            type: .purged,
            at: Timestamp.date(unixMilliseconds: 1_800_000_000_123),
            escrowID: "00112233445566778899aabbccddeeff",
            indexPrefix: "0011223344556677",
            detail: "confirmed",
            httpStatus: 200,
            actor: .worker("w1"),
            ageMilliseconds: 4567
        )
        #expect(
            Hex.encode(AuditChain.canonical(sequence: 7, draft: purged))
                == "70652d61756469742d3100000001370000000d3138303030303030303031323300000006707572676564000000203030"
                + "313132323333343435353636373738383939616162626363646465656666000000103030313132323333343435353636"
                + "373700000009636f6e6669726d65640000000332303000000009776f726b65723a77310000000434353637"
        )
        #expect(
            Hex.encode(AuditChain.hash(previous: previous, sequence: 7, draft: purged))
                == "2c52806ba1d0355ebdb44f6bb383abf3df267cb51013f6732fb7d3427208f273"
        )
        let rotated = AuditDraft(
            type: .keysRotated,
            at: Timestamp.date(unixMilliseconds: 1_800_000_000_124),
            detail: "active version 2",
            actor: .cli
        )
        #expect(
            Hex.encode(AuditChain.hash(previous: previous, sequence: 8, draft: rotated))
                == "6f5d8723717452d00c5631e4699b12d9b58853f91b5ca6b164c10e54b8beee56"
        )
    }
}
