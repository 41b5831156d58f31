internal import CSodium
internal import CX25519

/// libsodium's sealed box (`crypto_box_seal`), byte for byte, with its two X25519 steps done by BoringSSL.
///
/// A sealed box is an ephemeral key pair, the nonce `BLAKE2b-192(ephemeral public key ‖ recipient public key)`, and
/// `crypto_box` (X25519, HSalsa20, XSalsa20-Poly1305) from the ephemeral secret key to the recipient; the ephemeral
/// public key goes in front. libsodium 1.0.18 on an x86-64 machine with AVX does both of its X25519 steps with the
/// Montgomery ladder (about 25 µs each here): it has no fast path for the fixed base point behind its public API.
/// BoringSSL (the copy swift-crypto builds, called through `CX25519`) derives a public key from the base point's
/// precomputed Edwards table (about 9 µs) and multiplies with its ADX code (about 22 µs).
///
/// When the sealer also holds the recipient's secret key (a capture seals the profile to the escrow's own key pair,
/// made a moment before), the shared secret `X25519(ephemeral, recipient)` is the base point multiplied by the
/// product of the two secrets, so it too comes from the precomputed table (``sharedKey(ephemeralSecretKey:recipientSecretKey:)``):
/// the same bytes, about 10 µs instead of 22. A capture makes three public keys and two shared secrets, one of each
/// kind, so sealing costs about 60 µs instead of libsodium's ~130 (`docs/performance.md`).
///
/// What stays libsodium: every secret is drawn by `randombytes_buf` into `sodium_malloc`'ed memory
/// (``SecretBytes``) and every secret BoringSSL computes is written there too; the scalar arithmetic is libsodium's
/// (constant time); the nonce is libsodium's BLAKE2b, the shared key its HSalsa20, the box its XSalsa20-Poly1305.
/// Opening (``open(_:into:recipient:secretKey:_:)``) is `crypto_box_seal_open` with its one multiplication by
/// BoringSSL (about 20 µs, libsodium's 27). After each BoringSSL call that read a secret, `CX25519` wipes the stack
/// below it, where BoringSSL kept a clamped copy. Tests check every step against libsodium's own functions
/// (`SealedBoxTests`).
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
        return (publicKey(of: secretKey, x25519), secretKey)
    }

    /// The X25519 public key of `secretKey` (32 bytes): the same bytes as `crypto_scalarmult_base`.
    static func publicKey(of secretKey: SecretBytes, _ x25519: X25519 = .boringSSL) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: Sodium.boxPublicKeyBytes) { buffer, count in
            secretKey.withUnsafeBytes { secret in
                let secret = secret.baseAddress!.assumingMemoryBound(to: UInt8.self)
                switch x25519 {
                case .boringSSL: profile_escrow_x25519_public_key(buffer.baseAddress!, secret)
                case .libsodium: _ = crypto_scalarmult_base(buffer.baseAddress!, secret)
                }
            }
            count = Sodium.boxPublicKeyBytes
        }
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
        guard let ephemeral = ephemeral(to: recipient, recipientSecretKey: nil) else { return nil }
        return seal(message, to: recipient, using: ephemeral)
    }

    /// A sealed box's ephemeral half, which does not depend on the message: the ephemeral public key that goes in
    /// front of the box, and the box's key (`crypto_box_beforenm` of the recipient and the ephemeral secret key, which
    /// is not kept). Made ahead of a capture by ``SealingKeyReserve``; seals one box with the default nonce
    /// (``seal(_:to:using:)``); what goes beside it uses its key with nonces of its own (``sealBeside(_:to:using:)``,
    /// and the profile box key, Keyring+ProfileBoxKey.swift).
    struct Ephemeral: Sendable {
        let publicKey: [UInt8]
        let key: SecretBytes
    }

    /// A fresh ``Ephemeral`` for a box to `recipient`; `nil` when `recipient` is of small order. `recipientSecretKey`,
    /// when the sealer holds it, must be the secret key of `recipient`: the shared secret is then a multiplication of
    /// the base point (the type's documentation). It is not kept, and nothing of it is in the box.
    static func ephemeral(
        to recipient: [UInt8],
        recipientSecretKey: SecretBytes?,
        _ x25519: X25519 = .boringSSL
    ) -> Ephemeral? {
        precondition(recipient.count == Sodium.boxPublicKeyBytes, "a sealed box's recipient key has 32 bytes")
        let ephemeralSecretKey = SecretBytes.random(count: Sodium.boxSecretKeyBytes)
        guard
            let key = sealingKey(
                ephemeralSecretKey: ephemeralSecretKey,
                recipient: recipient,
                recipientSecretKey: recipientSecretKey,
                x25519
            )
        else { return nil }
        return Ephemeral(publicKey: publicKey(of: ephemeralSecretKey, x25519), key: key)
    }

    /// Seals `message` to `recipient` with `ephemeral` (made for `recipient`; never seal a second message with it
    /// here: the nonce depends on the keys alone): the format of `crypto_box_seal`.
    static func seal(
        _ message: UnsafeRawBufferPointer,
        to recipient: [UInt8],
        using ephemeral: Ephemeral,
        noncePrefix: [UInt8] = []
    ) -> [UInt8] {
        let publicKeyBytes = Sodium.boxPublicKeyBytes
        var sealed = [UInt8](repeating: 0, count: message.count + Sodium.sealBytes)
        sealed.withUnsafeMutableBufferPointer { output in
            let out = output.baseAddress!
            out.update(from: ephemeral.publicKey, count: publicKeyBytes)
            withNonce(ephemeral: out, recipient: recipient, prefix: noncePrefix) { nonce in
                ephemeral.key.withUnsafeBytes { key in
                    _ = crypto_box_easy_afternm(
                        out + publicKeyBytes,
                        message.baseAddress?.assumingMemoryBound(to: UInt8.self),
                        UInt64(message.count),
                        nonce,
                        key.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    )
                }
            }
        }
        return sealed
    }

    /// Opens a sealed box into `output` (its length less ``Sodium/sealBytes``), as `crypto_box_seal_open` does:
    /// `false` for a box too short, one of another recipient, a changed byte, or an ephemeral key of small order.
    /// With BoringSSL, its shared secret is BoringSSL's multiplication (about 20 µs, libsodium's 27) with the secret
    /// key read where libsodium keeps it.
    static func open(
        _ box: [UInt8],
        into output: UnsafeMutableRawBufferPointer,
        recipient: [UInt8],
        secretKey: SecretBytes,
        _ x25519: X25519 = defaultX25519
    ) -> Bool {
        let publicKeyBytes = Sodium.boxPublicKeyBytes
        guard box.count >= Sodium.sealBytes, output.count == box.count - Sodium.sealBytes,
            recipient.count == publicKeyBytes
        else { return false }
        let plaintext = output.baseAddress?.assumingMemoryBound(to: UInt8.self)
        if x25519 == .libsodium {
            return secretKey.withUnsafeBytes { secret in
                crypto_box_seal_open(
                    plaintext,
                    box,
                    UInt64(box.count),
                    recipient,
                    secret.baseAddress!.assumingMemoryBound(to: UInt8.self)
                ) == 0
            }
        }
        guard let key = box.withUnsafeBufferPointer({ sharedKey(secretKey: secretKey, recipient: $0.baseAddress!) })
        else { return false }
        return open(box, into: output, recipient: recipient, key: key)
    }

    /// The key a sealed box to `recipient` was sealed with (`crypto_box_beforenm` of its ephemeral public key, the
    /// box's first 32 bytes, and `secretKey`): one X25519 multiplication. `nil` for a box too short or an ephemeral
    /// key of small order. With the key, ``open(_:into:recipient:key:)`` opens the box with no multiplication, and
    /// whatever else was sealed under a key derived from it opens too (``Keyring/open(_:)``'s shortcut).
    static func key(
        of box: [UInt8],
        secretKey: SecretBytes,
        _ x25519: X25519 = defaultX25519
    ) -> SecretBytes? {
        guard box.count >= Sodium.sealBytes else { return nil }
        let ephemeral = Array(box.prefix(Sodium.boxPublicKeyBytes))
        return sealingKey(ephemeralSecretKey: secretKey, recipient: ephemeral, recipientSecretKey: nil, x25519)
    }

    /// Opens a sealed box to `recipient` with its key (``key(of:secretKey:_:)``, or the sealer's
    /// ``Ephemeral/key``): the same check and plaintext as `crypto_box_seal_open`, without its multiplication.
    static func open(
        _ box: [UInt8],
        into output: UnsafeMutableRawBufferPointer,
        recipient: [UInt8],
        key: SecretBytes,
        noncePrefix: [UInt8] = []
    ) -> Bool {
        let publicKeyBytes = Sodium.boxPublicKeyBytes
        guard box.count >= Sodium.sealBytes, output.count == box.count - Sodium.sealBytes,
            recipient.count == publicKeyBytes, key.count == crypto_box_beforenmbytes()
        else { return false }
        let plaintext = output.baseAddress?.assumingMemoryBound(to: UInt8.self)
        return box.withUnsafeBufferPointer { box in
            let ephemeral = box.baseAddress!
            return withNonce(ephemeral: ephemeral, recipient: recipient, prefix: noncePrefix) { nonce in
                key.withUnsafeBytes { key in
                    crypto_box_open_easy_afternm(
                        plaintext,
                        ephemeral + publicKeyBytes,
                        UInt64(box.count - publicKeyBytes),
                        nonce,
                        key.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    ) == 0
                }
            }
        }
    }

    /// A second box under the key of a sealed box to `recipient` (``Ephemeral``, which sealed or will seal that box):
    /// `ephemeral public key || crypto_box_easy_afternm(message, nonce, key)`, the layout of a sealed box, with the
    /// nonce `BLAKE2b-192("PEX1" || ephemeral public key || recipient)` instead of the sealed box's: one key, two
    /// nonces, so the two boxes never share a keystream. What it costs is a BLAKE2b and the box: the ephemeral's X25519
    /// work is the sealed box's. Whoever opens one opens the other with the same multiplication
    /// (``openBeside(_:into:recipient:key:)``).
    static func sealBeside(_ message: UnsafeRawBufferPointer, to recipient: [UInt8], using ephemeral: Ephemeral) -> [UInt8]
    {
        seal(message, to: recipient, using: ephemeral, noncePrefix: Magic.besideNonce)
    }

    /// Opens what ``sealBeside(_:to:using:)`` sealed, with its key (``key(of:secretKey:_:)``).
    static func openBeside(
        _ box: [UInt8],
        into output: UnsafeMutableRawBufferPointer,
        recipient: [UInt8],
        key: SecretBytes
    ) -> Bool {
        open(box, into: output, recipient: recipient, key: key, noncePrefix: Magic.besideNonce)
    }

    /// The nonce of a sealed box, as libsodium's `_crypto_box_seal_nonce`: BLAKE2b-192 of the ephemeral and the
    /// recipient's public keys.
    private static func withNonce<Result>(
        ephemeral: UnsafePointer<UInt8>,
        recipient: [UInt8],
        prefix: [UInt8] = [],
        _ body: (UnsafePointer<UInt8>) -> Result
    ) -> Result {
        let publicKeyBytes = Sodium.boxPublicKeyBytes
        let inputCount = prefix.count + 2 * publicKeyBytes
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: inputCount + 24) { scratch in
            let input = scratch.baseAddress!
            input.update(from: prefix, count: prefix.count)
            (input + prefix.count).update(from: ephemeral, count: publicKeyBytes)
            (input + prefix.count + publicKeyBytes).update(from: recipient, count: publicKeyBytes)
            let nonce = input + inputCount
            _ = crypto_generichash(nonce, crypto_box_noncebytes(), input, UInt64(inputCount), nil, 0)
            return body(nonce)
        }
    }

    /// A sealed box's shared key: from the two secrets when the recipient's is held and a scalar for them exists,
    /// else by multiplying `recipient` (also the way for a recipient of small order, which it refuses); with
    /// libsodium, `crypto_box_beforenm`.
    static func sealingKey(
        ephemeralSecretKey: SecretBytes,
        recipient: [UInt8],
        recipientSecretKey: SecretBytes?,
        _ x25519: X25519 = .boringSSL
    ) -> SecretBytes? {
        if let recipientSecretKey,
            let key = sharedKey(ephemeralSecretKey: ephemeralSecretKey, recipientSecretKey: recipientSecretKey, x25519)
        {
            return key
        }
        switch x25519 {
        case .boringSSL:
            return sharedKey(secretKey: ephemeralSecretKey, recipient: recipient)
        case .libsodium:
            let key = SecretBytes(count: crypto_box_beforenmbytes())
            let computed = key.withUnsafeMutableBytes { output in
                ephemeralSecretKey.withUnsafeBytes { secret in
                    crypto_box_beforenm(
                        output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        recipient,
                        secret.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    ) == 0
                }
            }
            return computed ? key : nil
        }
    }

    /// `crypto_box_beforenm(recipient, secretKey)`, by BoringSSL: the key a sealed box from `secretKey` to `recipient`
    /// uses; `nil` for a recipient of small order.
    static func sharedKey(secretKey: SecretBytes, recipient: [UInt8]) -> SecretBytes? {
        precondition(recipient.count == Sodium.boxPublicKeyBytes, "an X25519 public key has 32 bytes")
        return recipient.withUnsafeBufferPointer { sharedKey(secretKey: secretKey, recipient: $0.baseAddress!) }
    }

    /// ``sharedKey(secretKey:recipient:)`` of the 32 bytes at `recipient`.
    private static func sharedKey(secretKey: SecretBytes, recipient: UnsafePointer<UInt8>) -> SecretBytes? {
        let secret = SecretBytes(count: 32)
        let computed = secret.withUnsafeMutableBytes { output in
            secretKey.withUnsafeBytes { secretKey in
                profile_escrow_x25519(
                    output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    secretKey.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    recipient
                ) == 1
            }
        }
        return computed ? hsalsa20(secret) : nil
    }

    /// The same key as `crypto_box_beforenm(publicKey(of: recipientSecretKey), ephemeralSecretKey)`, computed from
    /// the two secrets as one multiplication of the base point (`profile_escrow_x25519_product_scalar`); `nil` in
    /// the case (probability about 2^-126) where no scalar survives X25519's clamping.
    static func sharedKey(
        ephemeralSecretKey: SecretBytes,
        recipientSecretKey: SecretBytes,
        _ x25519: X25519 = .boringSSL
    ) -> SecretBytes? {
        let scalar = SecretBytes(count: 32)
        let found = scalar.withUnsafeMutableBytes { output in
            ephemeralSecretKey.withUnsafeBytes { ephemeral in
                recipientSecretKey.withUnsafeBytes { recipient in
                    profile_escrow_x25519_product_scalar(
                        output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        ephemeral.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        recipient.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    ) == 0
                }
            }
        }
        guard found else { return nil }
        let secret = SecretBytes(count: 32)
        secret.withUnsafeMutableBytes { output in
            scalar.withUnsafeBytes { scalar in
                let output = output.baseAddress!.assumingMemoryBound(to: UInt8.self)
                let scalar = scalar.baseAddress!.assumingMemoryBound(to: UInt8.self)
                switch x25519 {
                case .boringSSL: profile_escrow_x25519_public_key(output, scalar)
                case .libsodium: _ = crypto_scalarmult_base(output, scalar)
                }
            }
        }
        return hsalsa20(secret)
    }

    /// `crypto_box_beforenm`'s second step: HSalsa20 of an X25519 shared secret, into libsodium's memory; `nil` if
    /// that secret is all zeroes (a recipient of small order), as libsodium refuses it.
    private static func hsalsa20(_ secret: SecretBytes) -> SecretBytes? {
        let key = SecretBytes(count: crypto_box_beforenmbytes())
        let derived = secret.withUnsafeBytes { secret -> Bool in
            let secret = secret.baseAddress!.assumingMemoryBound(to: UInt8.self)
            guard sodium_is_zero(secret, 32) == 0 else { return false }
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { zeroNonce in
                zeroNonce.initialize(repeating: 0)
                return key.withUnsafeMutableBytes { output in
                    crypto_core_hsalsa20(
                        output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        zeroNonce.baseAddress!,
                        secret,
                        nil
                    ) == 0
                }
            }
        }
        return derived ? key : nil
    }
}
