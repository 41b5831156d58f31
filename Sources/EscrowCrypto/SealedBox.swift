internal import CSodium
internal import Crypto
internal import FoundationEssentials

/// libsodium's sealed box (`crypto_box_seal`), byte for byte, with its two X25519 steps done by BoringSSL through
/// swift-crypto.
///
/// A sealed box is an ephemeral key pair, the nonce `BLAKE2b-192(ephemeral public key ‖ recipient public key)`, and
/// `crypto_box` (X25519, HSalsa20, XSalsa20-Poly1305) from the ephemeral secret key to the recipient; the ephemeral
/// public key goes in front. libsodium 1.0.18 on an x86-64 machine with AVX does both of its X25519 steps with the
/// Montgomery ladder (about 25 µs each here): it has no fast path for the fixed base point behind its public API.
/// BoringSSL derives a public key from the base point's precomputed Edwards table (about 9 µs) and multiplies with
/// its ADX code (about 22 µs). A capture makes three public keys and two shared secrets, so this saves about
/// 55 µs of its ~130 µs of crypto (`docs/performance.md`).
///
/// What stays libsodium: every secret is drawn by `randombytes_buf` into `sodium_malloc`'ed memory
/// (``SecretBytes``), the nonce is libsodium's BLAKE2b, the shared key its HSalsa20, the box its
/// XSalsa20-Poly1305, and opening is `crypto_box_seal_open` unchanged (BoringSSL would gain nothing there: its
/// private key type derives a public key first). swift-crypto holds a copy of a secret key for the length of one
/// call, in its `SecureBytes`, which it zeroes when freed. Tests check every step against libsodium's own
/// functions (`SealedBoxTests`).
///
/// Only in an optimised build (``defaultX25519``): a debug build seals with libsodium alone.
enum SealedBox {
    /// Which library makes a sealed box's X25519 steps; the bytes are the same either way.
    enum X25519: Sendable, CaseIterable {
        case boringSSL
        case libsodium
    }

    /// BoringSSL in an optimised build. SwiftPM compiles a dependency's C without optimisation in a debug build, and
    /// BoringSSL's X25519 then takes 149 µs for a public key and 178 µs for a shared secret, where libsodium, a
    /// system library, takes 25 and 27: a debug build (the test suite's, a developer's) seals with libsodium, so that
    /// what its timing checks measure is the product's cost, not an unoptimised dependency's.
    static let defaultX25519: X25519 = {
        #if DEBUG
        return .libsodium
        #else
        return .boringSSL
        #endif
    }()

    /// A fresh X25519 key pair: 32 random bytes from libsodium and their public key.
    static func keyPair(_ x25519: X25519 = defaultX25519) -> (publicKey: [UInt8], secretKey: SecretBytes) {
        let secretKey = SecretBytes.random(count: Sodium.boxSecretKeyBytes)
        switch x25519 {
        case .boringSSL:
            return (publicKey(of: secretKey), secretKey)
        case .libsodium:
            var publicKey = [UInt8](repeating: 0, count: Sodium.boxPublicKeyBytes)
            secretKey.withUnsafeBytes { secret in
                _ = crypto_scalarmult_base(&publicKey, secret.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
            return (publicKey, secretKey)
        }
    }

    /// The X25519 public key of `secretKey` (32 bytes): the same bytes as `crypto_scalarmult_base`.
    static func publicKey(of secretKey: SecretBytes) -> [UInt8] {
        privateKey(secretKey).publicKey.rawRepresentation.withUnsafeBytes { Array($0) }
    }

    /// Seals `message` to `recipient`: the same format as `crypto_box_seal`, which opens it. Returns `nil` when
    /// `recipient` is a point of small order (the shared secret is all zeroes), where `crypto_box_seal` fails too.
    static func seal(
        _ message: UnsafeRawBufferPointer,
        to recipient: [UInt8],
        _ x25519: X25519 = defaultX25519
    ) -> [UInt8]? {
        precondition(recipient.count == Sodium.boxPublicKeyBytes, "a sealed box's recipient key has 32 bytes")
        if x25519 == .libsodium {
            var sealed = [UInt8](repeating: 0, count: message.count + Sodium.sealBytes)
            let status = crypto_box_seal(
                &sealed,
                message.baseAddress?.assumingMemoryBound(to: UInt8.self),
                UInt64(message.count),
                recipient
            )
            return status == 0 ? sealed : nil
        }
        let ephemeralSecret = SecretBytes.random(count: Sodium.boxSecretKeyBytes)
        let ephemeral = privateKey(ephemeralSecret)
        guard let sharedKey = sharedKey(ephemeral, recipient) else { return nil }
        let publicKeyBytes = Sodium.boxPublicKeyBytes
        var sealed = [UInt8](repeating: 0, count: message.count + Sodium.sealBytes)
        sealed.withUnsafeMutableBufferPointer { output in
            let out = output.baseAddress!
            ephemeral.publicKey.rawRepresentation.withUnsafeBytes { epk in
                out.update(from: epk.bindMemory(to: UInt8.self).baseAddress!, count: publicKeyBytes)
            }
            // The nonce, as libsodium's `_crypto_box_seal_nonce`: BLAKE2b-192 of the ephemeral and recipient keys.
            let keys = Array(UnsafeBufferPointer(start: out, count: publicKeyBytes)) + recipient
            var nonce = [UInt8](repeating: 0, count: crypto_box_noncebytes())
            _ = crypto_generichash(&nonce, nonce.count, keys, UInt64(keys.count), nil, 0)
            sharedKey.withUnsafeBytes { key in
                _ = crypto_box_easy_afternm(
                    out + publicKeyBytes,
                    message.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    UInt64(message.count),
                    nonce,
                    key.baseAddress!.assumingMemoryBound(to: UInt8.self)
                )
            }
        }
        return sealed
    }

    /// `crypto_box_beforenm(recipient, secretKey)`: the key a sealed box from `secretKey` to `recipient` uses.
    static func sharedKey(secretKey: SecretBytes, recipient: [UInt8]) -> SecretBytes? {
        sharedKey(privateKey(secretKey), recipient)
    }

    /// `crypto_box_beforenm`: HSalsa20 of the X25519 shared secret, into libsodium's memory; `nil` if that secret
    /// is all zeroes (a recipient of small order), as libsodium refuses it.
    private static func sharedKey(
        _ secretKey: Curve25519.KeyAgreement.PrivateKey,
        _ recipient: [UInt8]
    ) -> SecretBytes? {
        // Cannot fail: the key has 32 bytes (checked by the caller), and any 32 bytes are an X25519 public key.
        guard let peer = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: recipient),
            let shared = try? secretKey.sharedSecretFromKeyAgreement(with: peer)
        else { return nil }
        let key = SecretBytes(count: crypto_box_beforenmbytes())
        let derived = shared.withUnsafeBytes { secret -> Bool in
            guard secret.count == 32, sodium_is_zero(secret.baseAddress!.assumingMemoryBound(to: UInt8.self), 32) == 0
            else { return false }
            let zeroNonce = [UInt8](repeating: 0, count: 16)
            return key.withUnsafeMutableBytes { output in
                crypto_core_hsalsa20(
                    output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    zeroNonce,
                    secret.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    nil
                ) == 0
            }
        }
        return derived ? key : nil
    }

    /// swift-crypto's private key for `secretKey`: it copies the 32 bytes and derives their public key.
    private static func privateKey(_ secretKey: SecretBytes) -> Curve25519.KeyAgreement.PrivateKey {
        secretKey.withUnsafeBytes { bytes in
            // Cannot fail: swift-crypto checks only the length, which is libsodium's 32.
            try! Curve25519.KeyAgreement.PrivateKey(rawRepresentation: bytes)
        }
    }
}
