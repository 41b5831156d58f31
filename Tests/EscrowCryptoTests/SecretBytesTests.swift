import Testing

@testable import EscrowCrypto

@Suite("SecretBytes")
struct SecretBytesTests {
    @Test func zeroFilledAndCounted() {
        let buffer = SecretBytes(count: 40)
        #expect(buffer.count == 40)
        #expect(buffer.withUnsafeBytes { $0.allSatisfy { $0 == 0 } })
        #expect(SecretBytes(count: 0).count == 0)
    }

    @Test func copiesBytes() {
        let source: [UInt8] = [1, 2, 3, 250]
        #expect(SecretBytes(copying: source).withUnsafeBytes { Array($0) } == source)
        // A collection without contiguous storage takes the element-by-element path.
        #expect(
            SecretBytes(copying: (1...4).map { UInt8($0) }.lazy.map { $0 * 2 }).withUnsafeBytes { Array($0) } == [
                2, 4, 6, 8,
            ]
        )
    }

    @Test func randomIsRandom() {
        let first = SecretBytes.random(count: 32)
        let second = SecretBytes.random(count: 32)
        #expect(first.count == 32)
        #expect(first != second)
        #expect(first.withUnsafeBytes { !$0.allSatisfy { $0 == 0 } })
    }

    @Test func mutableAccessWrites() {
        let buffer = SecretBytes(count: 3)
        buffer.withUnsafeMutableBytes { $0[1] = 7 }
        #expect(buffer.withUnsafeBytes { Array($0) } == [0, 7, 0])
    }

    @Test func constantTimeEquality() {
        #expect(secret("same secret") == secret("same secret"))
        #expect(secret("same secret") != secret("same secreT"))
        #expect(secret("short") != secret("shorter"))
        #expect(SecretBytes(count: 0) == SecretBytes(count: 0))
    }

    @Test func descriptionsAreRedacted() {
        let buffer = secret("hunter2-very-secret")
        let renderings = [
            buffer.description, buffer.debugDescription, String(describing: buffer), String(reflecting: buffer),
            "\(buffer)",
            {
                var out = ""
                dump(buffer, to: &out)
                return out
            }(),
        ]
        for rendering in renderings {
            #expect(!rendering.contains("hunter2"))
            #expect(!rendering.contains("104"))  // "h" as a decimal byte
        }
        #expect(buffer.description == "SecretBytes(redacted)")
        #expect(Mirror(reflecting: buffer).children.isEmpty)
    }
}
