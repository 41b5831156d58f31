internal import CSodium

/// Process-wide libsodium initialisation and the size constants this module relies on.
///
/// libsodium 1.0.18's size macros that are built from other macros (`crypto_box_SEALBYTES`, ...) do not import
/// into Swift, so the sizes come from libsodium's size functions, once.
enum Sodium {
    /// `sodium_init()` runs exactly once, the first time any entry point of this module touches libsodium.
    private static let initialized: Bool = sodium_init() >= 0

    /// Makes sure libsodium is initialised; every entry point that calls libsodium calls this first.
    @inline(__always)
    static func ensureInitialized() {
        precondition(initialized, "libsodium could not be initialised")
    }

    /// X25519 public key size (`crypto_box_PUBLICKEYBYTES`, 32).
    static let boxPublicKeyBytes = crypto_box_publickeybytes()
    /// X25519 secret key size (`crypto_box_SECRETKEYBYTES`, 32).
    static let boxSecretKeyBytes = crypto_box_secretkeybytes()
    /// Overhead of a sealed box (`crypto_box_SEALBYTES`, 48).
    static let sealBytes = crypto_box_sealbytes()
    /// `crypto_auth` (HMAC-SHA512-256) tag size, 32.
    static let authBytes = crypto_auth_bytes()
    /// `crypto_auth` key size, 32.
    static let authKeyBytes = crypto_auth_keybytes()
}
