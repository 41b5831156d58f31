import Testing

@testable import EscrowCrypto

@Suite("Hashing")
struct HashingTests {
    /// BLAKE2b-256 published vectors (RFC 7693 reference implementation, 32-byte digest).
    @Test(arguments: [
        ("", "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8"),
        ("abc", "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319"),
    ])
    func blake2b256KnownAnswers(input: String, expectedHex: String) {
        #expect(Hashing.blake2b256(Array(input.utf8)) == bytes(hex: expectedHex))
        // The same through a non-contiguous collection.
        #expect(Hashing.blake2b256(input.utf8) == bytes(hex: expectedHex))
    }

    /// RFC 4231 test case 2.
    @Test func hmacSHA256RFC4231Case2() {
        let mac = Hashing.hmacSHA256(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
        #expect(mac == bytes(hex: "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
    }

    /// RFC 4231 test case 6: a 131-byte key, longer than the block size.
    @Test func hmacSHA256LongKey() {
        let key = [UInt8](repeating: 0xaa, count: 131)
        let message = Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)
        #expect(
            Hashing.hmacSHA256(key: key, message: message)
                == bytes(hex: "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
        )
    }

    @Test func hmacSHA256EmptyInputs() {
        // HMAC-SHA256 with empty key and message (widely published).
        #expect(
            Hashing.hmacSHA256(key: [UInt8](), message: [UInt8]())
                == bytes(hex: "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
        )
    }

    @Test func randomBytes() {
        #expect(Hashing.randomBytes(count: 0).isEmpty)
        let first = Hashing.randomBytes(count: 32)
        #expect(first.count == 32)
        #expect(first != Hashing.randomBytes(count: 32))
    }

    @Test func constantTimeEqual() {
        #expect(Hashing.constantTimeEqual([1, 2, 3], [1, 2, 3]))
        #expect(!Hashing.constantTimeEqual([1, 2, 3], [1, 2, 4]))
        #expect(!Hashing.constantTimeEqual([1, 2, 3], [1, 2]))
        #expect(!Hashing.constantTimeEqual([], [0]))
        #expect(Hashing.constantTimeEqual([], []))
    }
}
