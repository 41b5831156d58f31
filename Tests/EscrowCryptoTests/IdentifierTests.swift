import Foundation
import Testing

@testable import EscrowCrypto

@Suite("EscrowID and BlindIndex")
struct IdentifierTests {
    @Test func escrowIDTextForm() throws {
        let id = EscrowID.random()
        #expect(id.bytes.count == 16)
        #expect(id.hex.count == 32)
        #expect(id.hex == id.hex.lowercased())
        #expect(id.description == id.hex)
        #expect(EscrowID(hex: id.hex) == id)
        #expect(EscrowID(hex: id.hex.uppercased()) == id)
        #expect(EscrowID.random() != id)
        let fixed = try #require(EscrowID(bytes: Array(0..<16)))
        #expect(fixed.hex == "000102030405060708090a0b0c0d0e0f")
    }

    /// Every byte value, from an array, a slice, a plain sequence and nothing, each way round.
    @Test func hexOfEveryByteFromAnyCollection() {
        let all = (0...255).map { UInt8($0) }
        let expected = all.map { String(format: "%02x", $0) }.joined()
        #expect(Hex.encode(all) == expected)
        #expect(Hex.encode(all[16..<32]) == String(expected.dropFirst(32).prefix(32)))
        #expect(Hex.encode(all.lazy.map { $0 }) == expected)
        #expect(Hex.encode(AnySequence(all)) == expected)
        #expect(Hex.encode([UInt8]()) == "")
        #expect(Hex.decode(expected) == all)
        #expect(Hex.decode(expected.uppercased()) == all)
    }

    @Test(arguments: [
        "", "00", String(repeating: "0", count: 31), String(repeating: "0", count: 33),
        String(repeating: "g", count: 32), String(repeating: "0", count: 30) + " 0",
    ])
    func escrowIDRejectsBadHex(text: String) {
        #expect(EscrowID(hex: text) == nil)
    }

    /// A new escrow's id starts with its capture time in big-endian milliseconds, so ids sort by capture time;
    /// the other 10 bytes are random: ids of one millisecond differ.
    @Test func newEscrowIDsAreInTimeOrderAndUnguessable() throws {
        // Half a millisecond past one, so that no rounding of the Double puts it in another millisecond.
        let at = Date(timeIntervalSince1970: 1_790_000_000.1235)
        let id = EscrowID.new(at: at)
        #expect(id.hex.hasPrefix(String(1_790_000_000_123, radix: 16).leftPadded(to: 12)))
        let sameMillisecond = (0..<1000).map { _ in EscrowID.new(at: at) }
        #expect(Set(sameMillisecond.map(\.hex)).count == 1000, "80 random bits: no two alike")
        #expect(Set(sameMillisecond.map { $0.bytes[6...].first! }).count > 100, "the tail is random")
        let times = (0..<200).map { at.addingTimeInterval(Double($0) * 0.002) }.shuffled()
        let ids = times.map { EscrowID.new(at: $0) }
        let byID = zip(ids, times).sorted { $0.0.hex < $1.0.hex }.map(\.1)
        #expect(byID == times.sorted(), "sorted by id is sorted by capture time")
        #expect(EscrowID.new(at: Date(timeIntervalSince1970: -5)).hex.hasPrefix("000000000000"))
    }

    @Test func escrowIDRejectsBadLength() {
        #expect(EscrowID(bytes: Array(repeating: 0, count: 15)) == nil)
        #expect(EscrowID(bytes: Array(repeating: 0, count: 17)) == nil)
    }

    @Test func escrowIDCodableAsHex() throws {
        let id = EscrowID.random()
        let json = try JSONEncoder().encode([id])
        #expect(String(decoding: json, as: UTF8.self) == "[\"\(id.hex)\"]")
        #expect(try JSONDecoder().decode([EscrowID].self, from: json) == [id])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([EscrowID].self, from: Data("[\"zz\"]".utf8)) }
    }

    @Test func blindIndexShape() throws {
        #expect(BlindIndex(bytes: Array(repeating: 0, count: 31)) == nil)
        let index = try #require(BlindIndex(bytes: Array(0..<32)))
        #expect(index.prefixHex == "0001020304050607")
        #expect(index.hex.count == 64)
        #expect(!index.description.contains(index.hex))
    }

    /// Expected value computed once with PyNaCl 1.6.2:
    /// `crypto_generichash_blake2b_salt_personal(uid, digest_size=32, key=bytes(range(32)))`.
    @Test func blindIndexKnownAnswer() {
        let keyring = fixedKeyKeyring()
        let index = keyring.blindIndex(userIdentifier: FakeUser.first)
        #expect(index.bytes == bytes(hex: "a195a1b59a3e9c66a8e74041bdec36a9244e67a8dcbb2f331aa55eca305d7629"))
        #expect(index.prefixHex == "a195a1b59a3e9c66")
    }

    @Test func blindIndexDependsOnUserAndKey() {
        let keyring = Keyring.generate()
        #expect(
            keyring.blindIndex(userIdentifier: FakeUser.first) == keyring.blindIndex(userIdentifier: FakeUser.first)
        )
        #expect(
            keyring.blindIndex(userIdentifier: FakeUser.first) != keyring.blindIndex(userIdentifier: FakeUser.second)
        )
        #expect(
            keyring.blindIndex(userIdentifier: FakeUser.first)
                != Keyring.generate().blindIndex(userIdentifier: FakeUser.first)
        )
    }

    /// Expected value computed once with PyNaCl 1.6.2: keyed BLAKE2b-256 of "PEC1" || blindIndex || plaintext with
    /// the row key bytes(range(32, 64)).
    @Test func contentTagKnownAnswer() {
        let keyring = fixedKeyKeyring()
        let index = keyring.blindIndex(userIdentifier: FakeUser.first)
        let tag = keyring.contentTag(blindIndex: index, plaintext: secret("{\"fake\":\"profile\"}"))
        #expect(tag == bytes(hex: "354426e2d7075712939905b577ef34727a11f3a923ec55a7beada1c97be8a396"))
    }

    @Test func contentTagDistinguishesContentAndUser() {
        let keyring = Keyring.generate()
        let first = keyring.blindIndex(userIdentifier: FakeUser.first)
        let second = keyring.blindIndex(userIdentifier: FakeUser.second)
        let tag = keyring.contentTag(blindIndex: first, plaintext: secret("a"))
        #expect(tag.count == 32)
        #expect(tag == keyring.contentTag(blindIndex: first, plaintext: secret("a")))
        #expect(tag != keyring.contentTag(blindIndex: first, plaintext: secret("b")))
        #expect(tag != keyring.contentTag(blindIndex: second, plaintext: secret("a")))
        #expect(tag == keyring.publicOnly().contentTag(blindIndex: first, plaintext: secret("a")))
    }
}

extension String {
    fileprivate func leftPadded(to count: Int) -> String {
        String(repeating: "0", count: max(0, count - self.count)) + self
    }
}
