import EscrowCrypto
import NIOConcurrencyHelpers

/// An in-memory stand-in for an engine, for the file format's tests: a wrapped blob is a random handle; unwrapping
/// it needs the same associated data, as AES-GCM's would.
final class FakeCustodian: KeyCustodian, Sendable {
    private let store = NIOLockedValueBox<[[UInt8]: ([UInt8], SecretBytes)]>([:])
    let engine = "fake engine"
    private let calls = NIOLockedValueBox(0)

    /// How many wrap, unwrap or rewrap calls were made.
    var callCount: Int { calls.withLockedValue { $0 } }

    func wrap(_ secret: SecretBytes, associatedData: [UInt8]) async throws(CryptoError) -> [UInt8] {
        calls.withLockedValue { $0 += 1 }
        let handle = Hashing.randomBytes(count: 24)
        store.withLockedValue {
            $0[handle] = (associatedData, SecretBytes(copying: secret.withUnsafeBytes { Array($0) }))
        }
        return handle
    }

    func unwrap(_ wrapped: [UInt8], associatedData: [UInt8]) async throws(CryptoError) -> SecretBytes {
        calls.withLockedValue { $0 += 1 }
        guard let entry = store.withLockedValue({ $0[wrapped] }), entry.0 == associatedData else {
            throw CryptoError(code: .wrappedKeyInvalid, message: "fake engine: does not unwrap")
        }
        return entry.1
    }
}
