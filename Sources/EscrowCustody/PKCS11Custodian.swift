internal import CPKCS11
public import EscrowCrypto
import Foundation
import NIOConcurrencyHelpers

/// Key custody through a PKCS#11 token (an HSM, SoftHSM2): `CKM_AES_GCM` inside the token with an AES-256 key that
/// is sensitive and not extractable, found by its label (and, when ``mayCreateKey``, created when the token has
/// none). The module is loaded at run time (`dlopen`); the PIN comes from `PROFILE_ESCROW_PKCS11_PIN` or a file
/// named by `PROFILE_ESCROW_PKCS11_PIN_FILE`.
///
/// A wrapped secret key is `iv (12 bytes, random) || ciphertext || tag (16 bytes)`. Each call runs on a thread of
/// its own and is bounded by ``timeout``: a token that hangs makes the call fail as unavailable.
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
        let pin = try self.pin.read(engine: engine)
        let create = mayCreateKey
        return try await bounded { () throws(CryptoError) -> [UInt8] in
            try self.withKey(pin: pin, create: create) { functions, session, key throws(CryptoError) -> [UInt8] in
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
    }

    public func unwrap(_ wrapped: [UInt8], associatedData: [UInt8]) async throws(CryptoError) -> SecretBytes {
        guard wrapped.count > Self.ivCount + Self.tagCount else {
            throw CryptoError(code: .wrappedKeyInvalid, message: "\(engine): a wrapped secret key is too short")
        }
        let pin = try self.pin.read(engine: engine)
        return try await bounded { () throws(CryptoError) -> SecretBytes in
            try self.withKey(pin: pin, create: false) { functions, session, key throws(CryptoError) -> SecretBytes in
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
    }

    /// Loads the module, opens a session on the token, logs in, finds (or creates) the key, checks that it cannot
    /// leave the token, runs `body`, and closes the session. Serialised: one token call at a time in the process.
    private func withKey<T>(
        pin: SecretBytes,
        create: Bool,
        _ body: (CK_FUNCTION_LIST_PTR, CK_SESSION_HANDLE, CK_OBJECT_HANDLE) throws(CryptoError) -> T
    ) throws(CryptoError) -> T {
        Self.lock.lock()
        defer { Self.lock.unlock() }
        do {
            var functions: CK_FUNCTION_LIST_PTR?
            try check(profile_escrow_p11_load(pkcs11.module, &functions), "load the module")
            guard let functions else { throw failure("the module has no function list") }
            var session = CK_SESSION_HANDLE(0)
            let token = Array(pkcs11.token.utf8)
            let opened = pin.withUnsafeBytes { pinBytes in
                profile_escrow_p11_open(
                    functions,
                    token,
                    UInt(token.count),
                    pinBytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    UInt(pinBytes.count),
                    &session
                )
            }
            try check(opened, "log in")
            defer { profile_escrow_p11_close(functions, session) }
            let label = Array(pkcs11.key.utf8)
            var key = CK_OBJECT_HANDLE(0)
            var created: Int32 = 0
            try check(
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
            var sensitive = CK_BBOOL(0)
            var extractable = CK_BBOOL(1)
            try check(profile_escrow_p11_key_flags(functions, session, key, &sensitive, &extractable), "read the key")
            guard sensitive != 0, extractable == 0 else {
                throw CryptoError(
                    code: .custodyRefused,
                    message: "\(engine): the key is not both sensitive and non-extractable: it could leave the token"
                )
            }
            return try body(functions, session, key)
        }
    }

    private static let lock = NIOLock()

    /// Runs `work` on a thread of its own; fails as unavailable when it has not finished within ``timeout`` (the
    /// thread is then left to finish alone).
    private func bounded<T: Sendable>(
        _ work: @escaping @Sendable () throws(CryptoError) -> T
    ) async throws(CryptoError) -> T {
        let engine = self.engine
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        let result: Result<T, CryptoError> = await withCheckedContinuation { continuation in
            let done = NIOLockedValueBox(false)
            let finish = { @Sendable (result: Result<T, CryptoError>) in
                let first = done.withLockedValue { done -> Bool in
                    defer { done = true }
                    return !done
                }
                if first { continuation.resume(returning: result) }
            }
            let thread = Thread {
                do throws(CryptoError) {
                    finish(.success(try work()))
                } catch {
                    finish(.failure(error))
                }
            }
            thread.start()
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
                finish(.failure(CryptoError(code: .custodyUnavailable, message: "\(engine): no answer in time")))
            }
        }
        return try result.get()
    }

    private func failure(_ cause: String) -> CryptoError {
        CryptoError(code: .custodyUnavailable, message: "\(engine): \(cause)")
    }

    /// A Cryptoki return value in words, as a ``CryptoError`` naming the engine (never the PIN).
    private func check(_ rv: CK_RV, _ step: String) throws(CryptoError) {
        guard rv != CKR_OK else { return }
        let (code, cause): (CryptoError.Code, String) =
            switch rv {
            case UInt(PROFILE_ESCROW_CKR_MODULE_NOT_LOADED): (.custodyUnavailable, "the module cannot be loaded")
            case UInt(PROFILE_ESCROW_CKR_TOKEN_NOT_FOUND): (.custodyUnavailable, "no token with that label")
            case UInt(PROFILE_ESCROW_CKR_KEY_NOT_FOUND): (.custodyRefused, "no AES key with that label in the token")
            case UInt(PROFILE_ESCROW_CKR_KEY_AMBIGUOUS): (.custodyRefused, "more than one key with that label")
            case CKR_PIN_INCORRECT, CKR_PIN_INVALID, CKR_PIN_LEN_RANGE: (.custodyRefused, "wrong PIN")
            case CKR_PIN_LOCKED: (.custodyRefused, "the PIN is locked")
            case CKR_PIN_EXPIRED: (.custodyRefused, "the PIN has expired")
            case CKR_USER_PIN_NOT_INITIALIZED: (.custodyRefused, "the token's user PIN is not initialised")
            case CKR_KEY_FUNCTION_NOT_PERMITTED: (.custodyRefused, "the key may not be used for this (disabled?)")
            case CKR_MECHANISM_INVALID, CKR_MECHANISM_PARAM_INVALID:
                (.custodyRefused, "the token does not support CKM_AES_GCM")
            case CKR_DEVICE_REMOVED, CKR_TOKEN_NOT_PRESENT, CKR_DEVICE_ERROR, CKR_DEVICE_MEMORY:
                (.custodyUnavailable, "the token is not available")
            default: (.custodyRefused, "CK_RV 0x\(String(rv, radix: 16))")
            }
        throw CryptoError(code: code, message: "\(engine): cannot \(step): \(cause)")
    }
}
