public import Crypto
import CryptoExtras
public import EscrowCrypto
import Foundation
import NIOCore
import NIOHTTP1

/// Apple's key in OpenBao/Vault Transit: an `ecdsa-p256` key brought in by Transit's BYOK import (not exportable),
/// signing with `transit/sign/<key>`, `hash_algorithm=sha2-256` and `marshaling_algorithm=jws` (the answer's
/// signature is then `r || s` in base64url, what a JWS carries). The token comes from `PROFILE_ESCROW_TRANSIT_TOKEN`
/// or the file named by `PROFILE_ESCROW_TRANSIT_TOKEN_FILE`; plain `http` only to loopback.
public struct TransitAppleKeySigner: AppleClientSecretSigner {
    public let transit: KeyCustody.Transit
    let client: TransitCustodian

    public init(_ transit: KeyCustody.Transit, environment: [String: String], timeout: Duration = .seconds(10)) {
        self.transit = transit
        self.client = TransitCustodian(transit, environment: environment, timeout: timeout)
    }

    public var custody: String { KeyCustody.transit(transit).engine }

    /// Imports `key` as a new Transit key (refused by Transit when the name is taken): the key's PKCS#8 DER wrapped
    /// (AES key wrap with padding) under a fresh AES-256 key, itself wrapped by Transit's RSA wrapping key
    /// (RSA-OAEP with SHA-256).
    public func importKey(_ key: P256.Signing.PrivateKey) async throws(EscrowCrypto.CryptoError) {
        let answer = try await client.send(.GET, path: "wrapping_key", operation: "read the wrapping key", body: nil)
        let object = try? JSONSerialization.jsonObject(with: Data(answer.readableBytesView)) as? [String: Any]
        guard let pem = (object?["data"] as? [String: Any])?["public_key"] as? String else {
            throw EscrowCrypto.CryptoError(code: .custodyUnavailable, message: "\(custody): no wrapping key")
        }
        let ephemeral = SymmetricKey(size: .bits256)
        var pkcs8 = Array(key.derRepresentation)
        defer { for index in pkcs8.indices { pkcs8[index] = 0 } }
        let ciphertext: [UInt8]
        do {
            let wrappingKey = try _RSA.Encryption.PublicKey(pemRepresentation: pem)
            let wrappedEphemeral = try ephemeral.withUnsafeBytes {
                try wrappingKey.encrypt(Data($0), padding: .PKCS1_OAEP_SHA256)
            }
            ciphertext = Array(wrappedEphemeral) + (try AESKeyWrapWithPadding.wrap(pkcs8, using: ephemeral))
        } catch {
            throw EscrowCrypto.CryptoError(code: .custodyRefused, message: "\(custody): cannot wrap the key for import")
        }
        var body = ByteBufferAllocator().buffer(capacity: ciphertext.count * 2 + 128)
        body.writeString(#"{"type":"ecdsa-p256","hash_function":"SHA256","exportable":false,"ciphertext":""#)
        body.writeString(Data(ciphertext).base64EncodedString())
        body.writeString(#""}"#)
        _ = try await client.send(.POST, path: "keys/\(transit.key)/import", operation: "import", body: body)
    }

    public func sign(_ message: [UInt8]) async throws(EscrowCrypto.CryptoError) -> [UInt8] {
        var body = ByteBufferAllocator().buffer(capacity: message.count * 2 + 96)
        body.writeString(#"{"hash_algorithm":"sha2-256","marshaling_algorithm":"jws","input":""#)
        body.writeString(Data(message).base64EncodedString())
        body.writeString(#""}"#)
        let answer = try await client.post("sign", body: body)
        let signature = answer.withUnsafeReadableBytes { bytes -> [UInt8]? in
            guard let value = TransitCustodian.stringValue(of: "signature", in: bytes) else { return nil }
            let prefix = Array("vault:v".utf8)
            guard value.starts(with: prefix),
                let colon = value.dropFirst(prefix.count).firstIndex(of: UInt8(ascii: ":"))
            else { return nil }
            return Base64URL.decode(value[(colon + 1)...])
        }
        guard let signature, signature.count == 64 else {
            throw EscrowCrypto.CryptoError(
                code: .custodyRefused,
                message: "\(custody): the sign answer has no P-256 JWS signature (is the key ecdsa-p256?)"
            )
        }
        return signature
    }
}
