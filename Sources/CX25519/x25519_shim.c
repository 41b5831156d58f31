// X25519 for sealing, by BoringSSL, with one shared secret computed as a multiplication of the base point.
//
// Why by hand, in C: swift-crypto's `Curve25519.KeyAgreement` wraps BoringSSL's X25519, but it copies secrets into
// its own buffers and returns public keys (and so a shared secret computed as one) in ordinary arrays that are never
// zeroed; here every secret stays in the caller's `sodium_malloc`'ed memory, and temporaries are wiped with
// `sodium_memzero`. Neither library offers the product scalar below.

#include "x25519_shim.h"

#include <sodium.h>
#include <string.h>

// BoringSSL as swift-crypto builds it into every binary that links its `Crypto` product, under swift-crypto's symbol
// prefix (its `CCryptoBoringSSL` target is not a product that can be depended on). The two functions are BoringSSL's
// public API (`curve25519.h`); a change of prefix fails the link, it cannot go wrong silently.
extern void CCryptoBoringSSL_X25519_public_from_private(uint8_t out_public_value[32], const uint8_t private_key[32]);
extern int CCryptoBoringSSL_X25519(
    uint8_t out_shared_key[32], const uint8_t private_key[32], const uint8_t peer_public_value[32]);

// BoringSSL copies the (clamped) secret scalar into a local array and leaves it there when it returns. Called right
// after it from the same frame, this overwrites the stack its frames used (they need well under 8 KiB), as libsodium's
// later `sodium_stackzero` does.
__attribute__((noinline)) static void wipe_stack_below_caller(void) {
    unsigned char scratch[8192];
    sodium_memzero(scratch, sizeof scratch);
    __asm__ __volatile__("" : : "r"(scratch) : "memory");
}

void profile_escrow_x25519_public_key(uint8_t out_public_key[32], const uint8_t secret_key[32]) {
    CCryptoBoringSSL_X25519_public_from_private(out_public_key, secret_key);
    wipe_stack_below_caller();
}

int profile_escrow_x25519(
    uint8_t out_shared_secret[32], const uint8_t secret_key[32], const uint8_t peer_public_key[32]) {
    int result = CCryptoBoringSSL_X25519(out_shared_secret, secret_key, peer_public_key);
    wipe_stack_below_caller();
    return result;
}

// 2^254 mod L and 8^-1 mod L, little-endian, where L = 2^252 + 27742317777372353535851937790883648493 is the order of
// the base point.
static const unsigned char two_254[32] = {
    0x39, 0x84, 0x1e, 0xe9, 0xb0, 0xd6, 0xc8, 0xf7, 0x7c, 0x29, 0x19, 0x17, 0x64, 0x12, 0x63, 0xc1,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f,
};
static const unsigned char inverse_of_8[32] = {
    0x79, 0x2f, 0xdc, 0xe2, 0x29, 0xe5, 0x06, 0x61, 0xd0, 0xda, 0x1c, 0x7d, 0xb3, 0x9d, 0xd3, 0x07,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x06,
};

// X25519's clamp of a secret, reduced mod L.
static void clamped_mod_l(unsigned char out[32], const uint8_t secret[32]) {
    unsigned char wide[64] = {0};
    memcpy(wide, secret, 32);
    wide[0] &= 248;
    wide[31] &= 127;
    wide[31] |= 64;
    crypto_core_ed25519_scalar_reduce(out, wide);
    sodium_memzero(wide, sizeof wide);
}

// The base point B has prime order L, so X25519(b, X25519_base(a)) = u(clamp(a)·clamp(b)·B) = u(s·B) with
// s = clamp(a)·clamp(b) mod L, and u(-P) = u(P), so u(-s·B) too. X25519_base(x) computes u(clamp(x)·B), and a
// clamped x is 2^254 + 8m with m < 2^251: x ≡ ±s (mod L) for m = (±s - 2^254)·8^-1 mod L. The two candidates sum to
// -2^252 ≡ L - 2^252 (mod L), so at least one is below 2^251 unless the first lies in [2^251, 2^251 + 2(L - 2^252)].
int profile_escrow_x25519_product_scalar(uint8_t out_scalar[32], const uint8_t secret_a[32], const uint8_t secret_b[32]) {
    unsigned char a[32], b[32], s[32], t[32], first[32], second[32];
    clamped_mod_l(a, secret_a);
    clamped_mod_l(b, secret_b);
    crypto_core_ed25519_scalar_mul(s, a, b);

    crypto_core_ed25519_scalar_sub(t, s, two_254);
    crypto_core_ed25519_scalar_mul(first, t, inverse_of_8);
    crypto_core_ed25519_scalar_negate(t, s);
    crypto_core_ed25519_scalar_sub(t, t, two_254);
    crypto_core_ed25519_scalar_mul(second, t, inverse_of_8);

    // Take the first candidate if it is below 2^251, else the second, without a branch on secret data.
    unsigned char keep_first = (unsigned char)(((unsigned int)(first[31] >> 3) - 1U) >> 8);
    unsigned char m[32];
    for (int i = 0; i < 32; i++) {
        m[i] = (unsigned char)((first[i] & keep_first) | (second[i] & (unsigned char)~keep_first));
    }
    // Neither candidate fits: a branch on an event of probability about 2^-126.
    int fits = (m[31] >> 3) == 0;

    // out = 2^254 + 8m, which X25519's clamp leaves as it is.
    out_scalar[0] = (uint8_t)(m[0] << 3);
    for (int i = 1; i < 32; i++) {
        out_scalar[i] = (uint8_t)((m[i] << 3) | (m[i - 1] >> 5));
    }
    out_scalar[31] |= 64;

    sodium_memzero(a, sizeof a);
    sodium_memzero(b, sizeof b);
    sodium_memzero(s, sizeof s);
    sodium_memzero(t, sizeof t);
    sodium_memzero(first, sizeof first);
    sodium_memzero(second, sizeof second);
    sodium_memzero(m, sizeof m);
    if (!fits) {
        sodium_memzero(out_scalar, 32);
        return -1;
    }
    return 0;
}
