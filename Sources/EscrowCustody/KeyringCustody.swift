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
}
