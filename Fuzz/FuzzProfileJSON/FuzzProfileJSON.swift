import EscrowCore
import EscrowCrypto
import Foundation

/// The strict JSON parser, the profile input parser with its validation, and the sealed plaintext's
/// decoder, over the same bytes: each may refuse them, none may crash.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProfileJSON(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: count)
    _ = try? StrictJSON.parse(bytes)
    if let input = try? ProfileParser.parse(bytes) {
        // A valid profile encodes and decodes back to itself.
        let plaintext = EscrowPlaintext(profile: input.profile, verified: false, capturedAt: Date())
        guard (try? EscrowPlaintext.decode(plaintext.encoded())) == plaintext else { fatalError("round trip") }
    }
    let secret = SecretBytes(count: count)
    secret.withUnsafeMutableBytes { buffer in
        if count > 0 { buffer.copyMemory(from: UnsafeRawBufferPointer(bytes)) }
    }
    _ = try? EscrowPlaintext.decode(secret)
    return 0
}
