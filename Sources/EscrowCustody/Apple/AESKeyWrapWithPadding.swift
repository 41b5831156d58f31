package import Crypto
import CryptoExtras
import Foundation

/// AES key wrap with padding (RFC 5649), the wrapping OpenBao/Vault Transit's BYOK import requires for the key it
/// receives. Written here because swift-crypto offers only RFC 3394's wrap (`AES.KeyWrap`), which takes keys whose
/// length is a multiple of 8 bytes and has no way to set the alternative initial value RFC 5649 needs; a PKCS#8
/// P-256 key is 138 bytes. Built from single AES block encryptions (CBC of one block with a zero IV, no padding).
package enum AESKeyWrapWithPadding {
    package static func wrap(_ plaintext: [UInt8], using kek: SymmetricKey) throws -> [UInt8] {
        precondition(!plaintext.isEmpty && plaintext.count < 1 << 32)
        // The alternative initial value: A65959A6, then the plaintext's length (32 bits, big-endian).
        let length = UInt32(plaintext.count)
        let initialValue: [UInt8] = [0xA6, 0x59, 0x59, 0xA6] + withUnsafeBytes(of: length.bigEndian) { Array($0) }
        var padded = plaintext
        padded += [UInt8](repeating: 0, count: (8 - plaintext.count % 8) % 8)
        if padded.count == 8 {
            return try block(initialValue + padded, kek)
        }
        // RFC 3394's wrapping process W with that initial value.
        var register = initialValue
        var blocks = stride(from: 0, to: padded.count, by: 8).map { Array(padded[$0..<$0 + 8]) }
        let count = blocks.count
        for round in 0..<6 {
            for index in 0..<count {
                let output = try block(register + blocks[index], kek)
                let step = UInt64(count * round + index + 1)
                register = zip(output[0..<8], withUnsafeBytes(of: step.bigEndian) { Array($0) }).map { $0 ^ $1 }
                blocks[index] = Array(output[8..<16])
            }
        }
        return register + blocks.flatMap { $0 }
    }

    /// One AES block encrypted with `kek`.
    private static func block(_ input: [UInt8], _ kek: SymmetricKey) throws -> [UInt8] {
        let zero = try AES._CBC.IV(ivBytes: [UInt8](repeating: 0, count: 16))
        return Array(try AES._CBC.encrypt(input, using: kek, iv: zero, noPadding: true))
    }
}
