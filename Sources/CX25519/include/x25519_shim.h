#ifndef PROFILE_ESCROW_X25519_SHIM_H
#define PROFILE_ESCROW_X25519_SHIM_H

#include <stdint.h>

/// BoringSSL's `X25519_public_from_private`: the public key of a 32-byte secret, from the base point's precomputed
/// Edwards table. The same bytes as libsodium's `crypto_scalarmult_base`. Wipes the stack BoringSSL used.
void profile_escrow_x25519_public_key(uint8_t out_public_key[32], const uint8_t secret_key[32]);

/// BoringSSL's `X25519`: the shared secret of `secret_key` and `peer_public_key`. Returns 1, or 0 when that secret
/// is all zeroes (a peer of small order), as libsodium's `crypto_scalarmult` refuses it. The same bytes as libsodium.
/// Wipes the stack BoringSSL used.
int profile_escrow_x25519(
    uint8_t out_shared_secret[32], const uint8_t secret_key[32], const uint8_t peer_public_key[32]);

/// A scalar whose public key is the X25519 shared secret of two secrets we both hold:
/// `X25519(b, X25519_base(a)) == X25519_base(out)`, so the shared secret costs a multiplication of the base point
/// (its precomputed table) instead of a variable-base one. Returns 0, or -1 in the case no such scalar survives
/// X25519's clamping (probability about 2^-126; the caller then multiplies the usual way). Constant time otherwise.
int profile_escrow_x25519_product_scalar(uint8_t out_scalar[32], const uint8_t secret_a[32], const uint8_t secret_b[32]);

#endif
