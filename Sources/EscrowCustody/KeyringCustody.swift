public import EscrowCrypto
public import Foundation

/// Opens keyrings in custody: the engine of a ``KeyCustody``, and a keyring file loaded and unwrapped in one step.
public enum KeyringCustody {
    /// The engine a keyring's custody names. Credentials are read from `environment` at each call.
    /// - Parameter mayCreateKey: a PKCS#11 key missing from the token is created when wrapping (`keys init`,
    ///   `keys custody wrap`); Transit keys are never created here (the operator creates and scopes them).
    public static func custodian(
        for custody: KeyCustody,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        mayCreateKey: Bool = false
    ) -> any KeyCustodian {
        switch custody {
        case .transit(let transit):
            TransitCustodian(transit, environment: environment)
        case .pkcs11(let pkcs11):
            PKCS11Custodian(pkcs11, environment: environment, mayCreateKey: mayCreateKey)
        }
    }

    /// Loads the keyring file at `path` (``Keyring/load(path:)``) and, when it is in custody, unwraps its secret
    /// keys through the engine: one call per version, whatever the number of escrows. A plain or public-only
    /// keyring needs no engine.
    public static func load(
        path: String,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) async throws(CryptoError) -> Keyring {
        let keyring = try Keyring.load(path: path)
        guard let custody = keyring.custody, keyring.isWrapped else { return keyring }
        return try await keyring.unwrapped(by: custodian(for: custody, environment: environment))
    }

    /// A keyring as a long-running service starts with it: unwrapped when the engine answers, else still wrapped.
    public struct Loaded: Sendable {
        /// The keyring: unwrapped, or (when ``unwrapFailure`` is set) with its secret keys still wrapped, which seals
        /// (capture needs only the public keys) and opens nothing. Never a plain key in place of a wrapped one.
        public var keyring: Keyring
        /// Why the engine did not unwrap it (unreachable, refused, a blob that does not unwrap); nil when it did, or
        /// when the keyring is not in custody.
        public var unwrapFailure: CryptoError?
    }

    /// Loads the keyring file at `path` and unwraps it when its engine answers; when the engine fails
    /// (``CryptoError/Code/custodyUnavailable``, ``CryptoError/Code/custodyRefused``,
    /// ``CryptoError/Code/wrappedKeyInvalid``), returns it still wrapped with the failure, so that capture-only work
    /// goes on while a ``KeyringReloader`` tries again. A file that does not load still throws.
    public static func loadForService(
        path: String,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) async throws(CryptoError) -> Loaded {
        let keyring = try Keyring.load(path: path)
        guard let custody = keyring.custody, keyring.isWrapped else { return Loaded(keyring: keyring) }
        do {
            return Loaded(keyring: try await keyring.unwrapped(by: custodian(for: custody, environment: environment)))
        } catch  where isEngineFailure(error) {
            return Loaded(keyring: keyring, unwrapFailure: error)
        }
    }

    /// Whether `error` is the custody engine's failure (unreachable, refused, a blob it would not unwrap), as
    /// opposed to a keyring file that does not load.
    public static func isEngineFailure(_ error: CryptoError) -> Bool {
        [.custodyUnavailable, .custodyRefused, .wrappedKeyInvalid].contains(error.code)
    }
}
