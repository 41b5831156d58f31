/// An engine that wraps and unwraps master secret keys with a key it never lets out (``KeyCustody``).
///
/// Every call is bounded in time. Errors are ``CryptoError``s with codes ``CryptoError/Code/custodyUnavailable``
/// (the engine cannot be reached or did not answer in time), ``CryptoError/Code/custodyRefused`` (a wrong token or
/// PIN, a missing or disabled key, no permission) or ``CryptoError/Code/wrappedKeyInvalid`` (the engine refused to
/// unwrap the blob: altered, or moved to another keyring or version); their messages name the engine and the
/// cause, never a secret, a token or a PIN.
public protocol KeyCustodian: Sendable {
    /// Where the engine is, for messages (``KeyCustody/engine``).
    var engine: String { get }

    /// Wraps `secret` (AES-256-GCM inside the engine) bound to `associatedData`; returns the blob the file stores.
    func wrap(_ secret: SecretBytes, associatedData: [UInt8]) async throws(CryptoError) -> [UInt8]

    /// Unwraps a blob made by ``wrap(_:associatedData:)`` with the same `associatedData`.
    func unwrap(_ wrapped: [UInt8], associatedData: [UInt8]) async throws(CryptoError) -> SecretBytes

    /// The same secret wrapped under the engine's newest key version (after a Transit key rotation). An engine
    /// without key versions unwraps and wraps again.
    func rewrap(_ wrapped: [UInt8], associatedData: [UInt8]) async throws(CryptoError) -> [UInt8]
}

extension KeyCustodian {
    public func rewrap(_ wrapped: [UInt8], associatedData: [UInt8]) async throws(CryptoError) -> [UInt8] {
        let secret = try await unwrap(wrapped, associatedData: associatedData)
        return try await wrap(secret, associatedData: associatedData)
    }
}
