import EscrowCrypto

/// The secret an app is given for the sign-in attempt it starts (`POST /v1/apple/attempts`), and what derives from it
/// one way: the attempt's `state` and `nonce` (so the store keeps hashes only, and the secret alone finds its
/// attempt), the binding hash its ticket's redeem is checked against, and the ticket of a native capture (so the same
/// capture sent again is given the same ticket, never a second one).
///
/// The state and nonce appear in Apple's authorize URL; neither reveals the secret.
struct AppAttemptSecret {
    let secret: String

    /// A secret as an app sends it back: at most 256 bytes (the service's are 43), never empty.
    init?(_ text: String) {
        guard !text.isEmpty, text.utf8.count <= 256 else { return nil }
        secret = text
    }

    /// A new secret of 256 bits.
    static func random() -> AppAttemptSecret { AppAttemptSecret(AppleSignInRoutes.secret())! }

    var state: String { derive("state") }
    var nonce: String { derive("nonce") }

    /// The SHA-256 of ``nonce`` in lowercase hex: what the app passes to `ASAuthorizationAppleIDRequest.nonce`, and so
    /// the `nonce` claim of the identity token Apple gives it.
    var nonceSHA256: String { Hex.encode(Hashing.sha256(Array(nonce.utf8))) }

    /// The attempt's binding hash in the store.
    var bindingHash: [UInt8] { AppleSignInRoutes.hash(secret) }

    /// The ticket of the native capture of this identity token and code (``SignInTicketText``, its own part derived
    /// from the secret): the same request gives the same ticket.
    func ticket(stateHash: [UInt8], identityToken: String, authorizationCode: String?) -> String {
        let token = Hex.encode(Hashing.sha256(Array(identityToken.utf8)))
        let code = Hex.encode(Hashing.sha256(Array((authorizationCode ?? "").utf8)))
        return SignInTicketText.make(stateHash: stateHash, secret: hmac("ticket \(token) \(code)"))
    }

    private func derive(_ label: String) -> String { Base64URL.encode(hmac(label)) }

    private func hmac(_ label: String) -> [UInt8] {
        Hashing.hmacSHA256(key: Array(secret.utf8), message: Array("profile-escrow app attempt \(label)".utf8))
    }
}
