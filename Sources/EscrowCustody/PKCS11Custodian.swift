internal import CPKCS11
public import EscrowCrypto

/// Key custody through a PKCS#11 token (an HSM, SoftHSM2): `CKM_AES_GCM` inside the token with an AES-256 key that
/// is sensitive and not extractable, found by its label (and, when ``mayCreateKey``, created when the token has
/// none). The module is loaded at run time (`dlopen`); the PIN comes from `PROFILE_ESCROW_PKCS11_PIN` or a file
/// named by `PROFILE_ESCROW_PKCS11_PIN_FILE`.
///
/// A wrapped secret key is `iv (12 bytes, random) || ciphertext || tag (16 bytes)`. Each call runs on a thread of
/// its own and is bounded by ``timeout``: a token that hangs makes the call fail as unavailable (``PKCS11Token``).
public struct PKCS11Custodian: KeyCustodian {
    public let pkcs11: KeyCustody.PKCS11
    let pin: CustodyCredential
    /// Whether ``wrap(_:associatedData:)`` may create the key when the token has none with its label
    /// (`keys init`, `keys custody wrap`); never when unwrapping.
    public var mayCreateKey: Bool
    public var timeout: Duration

    public init(
        _ pkcs11: KeyCustody.PKCS11,
        environment: [String: String],
        mayCreateKey: Bool = false,
        timeout: Duration = .seconds(10)
    ) {
        self.pkcs11 = pkcs11
        self.pin = CustodyCredential(
            variable: "PROFILE_ESCROW_PKCS11_PIN",
            name: "PKCS#11 PIN",
            environment: environment
        )
        self.mayCreateKey = mayCreateKey
        self.timeout = timeout
    }

    public var engine: String { KeyCustody.pkcs11(pkcs11).engine }

    static let ivCount = 12
    static let tagCount = 16

    public func wrap(_ secret: SecretBytes, associatedData: [UInt8]) async throws(CryptoError) -> [UInt8] {
        try await withKey(create: mayCreateKey) { functions, session, key throws(CryptoError) -> [UInt8] in
            let iv = Hashing.randomBytes(count: Self.ivCount)
            var output = [UInt8](repeating: 0, count: secret.count + Self.tagCount)
            var outputCount = UInt(output.count)
            let rv = secret.withUnsafeBytes { input in
                profile_escrow_p11_gcm(
                    functions,
                    session,
                    key,
                    1,
                    iv,
                    associatedData,
                    UInt(associatedData.count),
                    input.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    UInt(input.count),
                    &output,
                    &outputCount
                )
            }
            try self.check(rv, "encrypt")
            return iv + output[0..<Int(outputCount)]
        }
    }

    public func unwrap(_ wrapped: [UInt8], associatedData: [UInt8]) async throws(CryptoError) -> SecretBytes {
        guard wrapped.count > Self.ivCount + Self.tagCount else {
            throw CryptoError(code: .wrappedKeyInvalid, message: "\(engine): a wrapped secret key is too short")
        }
        return try await withKey(create: false) { functions, session, key throws(CryptoError) -> SecretBytes in
            let iv = Array(wrapped[0..<Self.ivCount])
            let sealed = Array(wrapped[Self.ivCount...])
            let output = SecretBytes(count: sealed.count)
            var outputCount = UInt(sealed.count)
            let rv = output.withUnsafeMutableBytes { buffer in
                profile_escrow_p11_gcm(
                    functions,
                    session,
                    key,
                    0,
                    iv,
                    associatedData,
                    UInt(associatedData.count),
                    sealed,
                    UInt(sealed.count),
                    buffer.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    &outputCount
                )
            }
            // A GCM tag that does not verify: CKR_ENCRYPTED_DATA_INVALID by the standard, a general error or a
            // failed function in some tokens (SoftHSM2).
            if [CKR_ENCRYPTED_DATA_INVALID, CKR_ENCRYPTED_DATA_LEN_RANGE, CKR_GENERAL_ERROR, CKR_FUNCTION_FAILED]
                .contains(rv)
            {
                throw CryptoError(
                    code: .wrappedKeyInvalid,
                    message: "\(self.engine): a wrapped secret key does not decrypt (altered, or moved to another "
                        + "keyring or version; CK_RV 0x\(String(rv, radix: 16)))"
                )
            }
            try self.check(rv, "decrypt")
            return output.withUnsafeBytes {
                SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[0..<Int(outputCount)]))
            }
        }
    }

    private func check(_ rv: CK_RV, _ step: String) throws(CryptoError) {
        try token.check(rv, step)
    }

    /// The token, for one call.
    private var token: PKCS11Token {
        PKCS11Token(
            module: pkcs11.module,
            token: pkcs11.token,
            engine: engine,
            pin: pin,
            timeout: timeout,
            keyKind: "AES key",
            mechanism: "CKM_AES_GCM"
        )
    }

    /// In a logged-in session: finds (or creates) the key, checks that it cannot leave the token, and runs `body`.
    private func withKey<T: Sendable>(
        create: Bool,
        _ body: @escaping @Sendable (CK_FUNCTION_LIST_PTR, CK_SESSION_HANDLE, CK_OBJECT_HANDLE) throws(CryptoError) -> T
    ) async throws(CryptoError) -> T {
        let token = self.token
        let label = Array(pkcs11.key.utf8)
        return try await token.run { functions, session throws(CryptoError) -> T in
            var key = CK_OBJECT_HANDLE(0)
            var created: Int32 = 0
            try token.check(
                profile_escrow_p11_find_key(
                    functions,
                    session,
                    label,
                    UInt(label.count),
                    create ? 1 : 0,
                    &key,
                    &created
                ),
                create ? "find or create the key" : "find the key"
            )
            try token.requireKeyStaysInside(functions, session, key)
            return try body(functions, session, key)
        }
    }
}
