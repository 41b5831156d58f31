internal import CSodium

/// The shortcut that lets a replay open an escrow with one X25519 multiplication instead of two.
///
/// Opening an escrow is two sealed boxes, each with its multiplication: the key box with the master secret key, then
/// the profile box with the escrow's secret key found inside. Those two multiplications were a fifth of a replay's
/// CPU. The sealer knows the profile box's key (its `crypto_box_beforenm`) and the key box's, so it also stores the
/// first sealed under a key derived from the second: whoever opens the key box (one multiplication, which gives its
/// key) opens the profile box's key with a BLAKE2b and a secretbox, and the profile box with no multiplication.
///
/// None of the documented bytes change (`docs/FORMAT.md`, "The profile box key"): the key box still holds the escrow's
/// secret key, the profile box still opens with it, and a row without the shortcut (sealed before it existed, or by
/// another implementation) opens the long way. Nothing new is exposed: only a holder of the key box's key reads the
/// shortcut, and that holder can open the key box and compute the same key from the escrow's secret key. The column is
/// outside the row MAC, and needs no such protection: it is authenticated under the key box's key, which nobody
/// without the master secret key can compute for a stored row; a shortcut that does not open, or whose key does not
/// open the profile box, is ignored and the long way taken, so a damaged one costs time, never a profile.
extension Keyring {
    /// Bytes of a stored shortcut: a secretbox nonce, then the 32-byte key and its tag.
    static let profileBoxKeyBytes = crypto_secretbox_noncebytes() + crypto_secretbox_macbytes() + 32

    /// `nonce || crypto_secretbox_easy(profileBoxKey, nonce, derivedKey)`, where `derivedKey` is
    /// `crypto_generichash(32, "PEB1" || id || blindIndex || u32be(version), key = keyBoxKey)`.
    static func sealProfileBoxKey(
        _ profileBoxKey: SecretBytes,
        under keyBoxKey: SecretBytes,
        id: EscrowID,
        blindIndex: BlindIndex,
        version: UInt32
    ) -> [UInt8] {
        let nonceBytes = crypto_secretbox_noncebytes()
        var sealed = [UInt8](repeating: 0, count: profileBoxKeyBytes)
        let derived = derivedKey(keyBoxKey, id: id, blindIndex: blindIndex, version: version)
        sealed.withUnsafeMutableBufferPointer { output in
            let out = output.baseAddress!
            randombytes_buf(out, nonceBytes)
            profileBoxKey.withUnsafeBytes { message in
                derived.withUnsafeBytes { key in
                    _ = crypto_secretbox_easy(
                        out + nonceBytes,
                        message.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        UInt64(message.count),
                        out,
                        key.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    )
                }
            }
        }
        return sealed
    }

    /// The profile box's key stored in `sealed`, opened with the key of its key box; `nil` when there is none (an
    /// escrow sealed before the shortcut) or it does not open.
    static func openProfileBoxKey(_ sealed: SealedEscrow, under keyBoxKey: SecretBytes) -> SecretBytes? {
        guard sealed.profileBoxKey.count == profileBoxKeyBytes else { return nil }
        let nonceBytes = crypto_secretbox_noncebytes()
        let derived = derivedKey(keyBoxKey, id: sealed.id, blindIndex: sealed.blindIndex, version: sealed.keyVersion)
        let key = SecretBytes(count: 32)
        let opened = sealed.profileBoxKey.withUnsafeBufferPointer { input in
            key.withUnsafeMutableBytes { output in
                derived.withUnsafeBytes { derived in
                    crypto_secretbox_open_easy(
                        output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        input.baseAddress! + nonceBytes,
                        UInt64(input.count - nonceBytes),
                        input.baseAddress!,
                        derived.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    ) == 0
                }
            }
        }
        return opened ? key : nil
    }

    private static func derivedKey(
        _ keyBoxKey: SecretBytes,
        id: EscrowID,
        blindIndex: BlindIndex,
        version: UInt32
    ) -> SecretBytes {
        var input: [UInt8] = []
        input.reserveCapacity(bindingBytes)
        input += Magic.profileBoxKey
        input += id.bytes
        input += blindIndex.bytes
        input += BigEndian.bytes(version)
        let derived = SecretBytes(count: 32)
        derived.withUnsafeMutableBytes { output in
            keyBoxKey.withUnsafeBytes { key in
                _ = crypto_generichash(
                    output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    32,
                    input,
                    UInt64(input.count),
                    key.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    key.count
                )
            }
        }
        return derived
    }
}
