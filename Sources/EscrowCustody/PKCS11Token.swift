internal import CPKCS11
import EscrowCrypto
import Foundation
import NIOConcurrencyHelpers

/// A PKCS#11 token as the custody engines use it (``PKCS11Custodian``, ``PKCS11AppleKeySigner``): the module loaded
/// at run time (`dlopen`), and for each call a session opened and logged in with the PIN, on a thread of its own,
/// bounded by ``timeout`` (a token that hangs makes the call fail as unavailable), serialised with every other token
/// call of the process. Cryptoki's return values become ``CryptoError``s naming the engine, never the PIN.
struct PKCS11Token: Sendable {
    var module: String
    var token: String
    /// The engine in words, for messages.
    var engine: String
    var pin: CustodyCredential
    var timeout: Duration
    /// What the engine's key is, for messages: `AES key`, `EC private key`.
    var keyKind: String
    /// The mechanism the engine uses, for messages: `CKM_AES_GCM`, `CKM_ECDSA`.
    var mechanism: String

    /// Reads the PIN, then runs `body` in a logged-in session on a thread of its own, within ``timeout``.
    func run<T: Sendable>(
        _ body: @escaping @Sendable (CK_FUNCTION_LIST_PTR, CK_SESSION_HANDLE) throws(CryptoError) -> T
    ) async throws(CryptoError) -> T {
        let pin = try self.pin.read(engine: engine)
        return try await bounded { () throws(CryptoError) -> T in
            try self.withSession(pin: pin, body)
        }
    }

    /// Loads the module, opens a session on the token, logs in, runs `body`, and closes the session.
    private func withSession<T>(
        pin: SecretBytes,
        _ body: (CK_FUNCTION_LIST_PTR, CK_SESSION_HANDLE) throws(CryptoError) -> T
    ) throws(CryptoError) -> T {
        Self.lock.lock()
        defer { Self.lock.unlock() }
        var functions: CK_FUNCTION_LIST_PTR?
        try check(profile_escrow_p11_load(module, &functions), "load the module")
        guard let functions else {
            throw CryptoError(code: .custodyUnavailable, message: "\(engine): the module has no function list")
        }
        var session = CK_SESSION_HANDLE(0)
        let label = Array(token.utf8)
        let opened = pin.withUnsafeBytes { pinBytes in
            profile_escrow_p11_open(
                functions,
                label,
                UInt(label.count),
                pinBytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                UInt(pinBytes.count),
                &session
            )
        }
        try check(opened, "log in")
        defer { profile_escrow_p11_close(functions, session) }
        return try body(functions, session)
    }

    /// Refuses a key that could leave the token: it must be both sensitive and not extractable.
    func requireKeyStaysInside(
        _ functions: CK_FUNCTION_LIST_PTR,
        _ session: CK_SESSION_HANDLE,
        _ key: CK_OBJECT_HANDLE
    ) throws(CryptoError) {
        var sensitive = CK_BBOOL(0)
        var extractable = CK_BBOOL(1)
        try check(profile_escrow_p11_key_flags(functions, session, key, &sensitive, &extractable), "read the key")
        guard sensitive != 0, extractable == 0 else {
            throw CryptoError(
                code: .custodyRefused,
                message: "\(engine): the key is not both sensitive and non-extractable: it could leave the token"
            )
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

    /// A Cryptoki return value in words, as a ``CryptoError`` naming the engine (never the PIN).
    func check(_ rv: CK_RV, _ step: String) throws(CryptoError) {
        guard rv != CKR_OK else { return }
        let (code, cause): (CryptoError.Code, String) =
            switch rv {
            case UInt(PROFILE_ESCROW_CKR_MODULE_NOT_LOADED): (.custodyUnavailable, "the module cannot be loaded")
            case UInt(PROFILE_ESCROW_CKR_TOKEN_NOT_FOUND): (.custodyUnavailable, "no token with that label")
            case UInt(PROFILE_ESCROW_CKR_KEY_NOT_FOUND): (.custodyRefused, "no \(keyKind) with that label in the token")
            case UInt(PROFILE_ESCROW_CKR_KEY_AMBIGUOUS): (.custodyRefused, "more than one key with that label")
            case UInt(PROFILE_ESCROW_CKR_KEY_EXISTS):
                (.custodyRefused, "the token already has a \(keyKind) with that label (choose another label)")
            case CKR_PIN_INCORRECT, CKR_PIN_INVALID, CKR_PIN_LEN_RANGE: (.custodyRefused, "wrong PIN")
            case CKR_PIN_LOCKED: (.custodyRefused, "the PIN is locked")
            case CKR_PIN_EXPIRED: (.custodyRefused, "the PIN has expired")
            case CKR_USER_PIN_NOT_INITIALIZED: (.custodyRefused, "the token's user PIN is not initialised")
            case CKR_KEY_FUNCTION_NOT_PERMITTED: (.custodyRefused, "the key may not be used for this (disabled?)")
            case CKR_MECHANISM_INVALID, CKR_MECHANISM_PARAM_INVALID:
                (.custodyRefused, "the token does not support \(mechanism)")
            case CKR_DEVICE_REMOVED, CKR_TOKEN_NOT_PRESENT, CKR_DEVICE_ERROR, CKR_DEVICE_MEMORY:
                (.custodyUnavailable, "the token is not available")
            default: (.custodyRefused, "CK_RV 0x\(String(rv, radix: 16))")
            }
        throw CryptoError(code: code, message: "\(engine): cannot \(step): \(cause)")
    }
}
