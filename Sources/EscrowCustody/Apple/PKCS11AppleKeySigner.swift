internal import CPKCS11
public import Crypto
public import EscrowCrypto
import Foundation

/// Apple's key in a PKCS#11 token: an EC P-256 private key (`CKO_PRIVATE_KEY`, `CKK_EC`), sensitive, not
/// extractable, for signing only, found by its label; signing is `CKM_ECDSA` inside the token over the SHA-256 digest
/// made here. The PIN comes from `PROFILE_ESCROW_PKCS11_PIN` or the file named by `PROFILE_ESCROW_PKCS11_PIN_FILE`.
/// ``KeyCustody/PKCS11/key`` is the EC key's label.
public struct PKCS11AppleKeySigner: AppleClientSecretSigner {
    public let pkcs11: KeyCustody.PKCS11
    let pin: CustodyCredential
    public var timeout: Duration

    public init(_ pkcs11: KeyCustody.PKCS11, environment: [String: String], timeout: Duration = .seconds(10)) {
        self.pkcs11 = pkcs11
        self.pin = CustodyCredential(
            variable: "PROFILE_ESCROW_PKCS11_PIN",
            name: "PKCS#11 PIN",
            environment: environment
        )
        self.timeout = timeout
    }

    public var custody: String { KeyCustody.pkcs11(pkcs11).engine }

    private var token: PKCS11Token {
        PKCS11Token(
            module: pkcs11.module,
            token: pkcs11.token,
            engine: custody,
            pin: pin,
            timeout: timeout,
            keyKind: "EC private key",
            mechanism: "CKM_ECDSA"
        )
    }

    /// Puts `key` into the token under the label, then checks that the token keeps it in: flagged sensitive and not
    /// extractable, and its value refused when asked for. Never replaces a key of the same label.
    public func importKey(_ key: P256.Signing.PrivateKey) async throws(EscrowCrypto.CryptoError) {
        let token = self.token
        let label = Array(pkcs11.key.utf8)
        let scalar = SecretBytes(copying: Array(key.rawRepresentation))
        try await token.run { functions, session throws(EscrowCrypto.CryptoError) in
            var handle = CK_OBJECT_HANDLE(0)
            let rv = scalar.withUnsafeBytes { bytes in
                profile_escrow_p11_import_ec_key(
                    functions,
                    session,
                    label,
                    UInt(label.count),
                    bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    UInt(bytes.count),
                    &handle
                )
            }
            try token.check(rv, "import the key")
            try Self.requireKeyStaysInside(token, functions, session, handle)
        }
    }

    /// Checks, in the token, that the key cannot leave it (the flags, and its value refused when asked for).
    public func checkKeyStaysInside() async throws(EscrowCrypto.CryptoError) {
        try await withKey { _, _, _ throws(EscrowCrypto.CryptoError) in }
    }

    public func sign(_ message: [UInt8]) async throws(EscrowCrypto.CryptoError) -> [UInt8] {
        let digest = Array(SHA256.hash(data: message))
        let token = self.token
        return try await withKey { functions, session, key throws(EscrowCrypto.CryptoError) -> [UInt8] in
            var signature = [UInt8](repeating: 0, count: 64)
            var count = UInt(signature.count)
            try token.check(
                profile_escrow_p11_ecdsa_sign(functions, session, key, digest, UInt(digest.count), &signature, &count),
                "sign"
            )
            guard count == 64 else {
                throw EscrowCrypto.CryptoError(
                    code: .custodyRefused,
                    message: "\(token.engine): the key is not a P-256 key"
                )
            }
            return signature
        }
    }

    /// In a logged-in session: finds the key, checks that it cannot leave the token, and runs `body`.
    private func withKey<T: Sendable>(
        _ body:
            @escaping @Sendable (CK_FUNCTION_LIST_PTR, CK_SESSION_HANDLE, CK_OBJECT_HANDLE) throws(EscrowCrypto
            .CryptoError) -> T
    ) async throws(EscrowCrypto.CryptoError) -> T {
        let token = self.token
        let label = Array(pkcs11.key.utf8)
        return try await token.run { functions, session throws(EscrowCrypto.CryptoError) -> T in
            var key = CK_OBJECT_HANDLE(0)
            try token.check(
                profile_escrow_p11_find_ec_key(functions, session, label, UInt(label.count), &key),
                "find the key"
            )
            try Self.requireKeyStaysInside(token, functions, session, key)
            return try body(functions, session, key)
        }
    }

    /// The flags (sensitive, not extractable), and the token's own answer when asked for the key's value: it must
    /// refuse (`CKR_ATTRIBUTE_SENSITIVE`).
    private static func requireKeyStaysInside(
        _ token: PKCS11Token,
        _ functions: CK_FUNCTION_LIST_PTR,
        _ session: CK_SESSION_HANDLE,
        _ key: CK_OBJECT_HANDLE
    ) throws(EscrowCrypto.CryptoError) {
        try token.requireKeyStaysInside(functions, session, key)
        guard profile_escrow_p11_value_readable(functions, session, key) == CKR_ATTRIBUTE_SENSITIVE else {
            throw EscrowCrypto.CryptoError(
                code: .custodyRefused,
                message: "\(token.engine): the token does not refuse to reveal the key's value"
            )
        }
    }
}
