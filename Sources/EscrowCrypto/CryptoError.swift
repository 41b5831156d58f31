/// An error from ``Keyring`` or sealing/opening.
///
/// Its `description` is deliberately generic and built from the ``code`` alone, so logging an error never leaks
/// data. ``message`` is meant for an operator (it can name a keyring path, a line number or a file mode) and never
/// holds key bytes, plaintext, a user identifier or another row's data.
public struct CryptoError: Error, Sendable, CustomStringConvertible {
    /// A stable, machine-readable error code. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable snake_case name, e.g. `ciphertext_invalid` (used as the dead-escrow reason code).
        public let rawValue: String

        init(_ rawValue: String) {
            self.rawValue = rawValue
        }

        public var description: String { rawValue }

        /// No keyring file at the given path.
        public static let keyringNotFound = Code("keyring_not_found")
        /// The keyring file is readable or writable by group or others, or cannot be accessed.
        public static let keyringPermissions = Code("keyring_permissions")
        /// The keyring file is not in the documented format (the message names the line number).
        public static let keyringMalformed = Code("keyring_malformed")
        /// `write(path:overwrite: false)` found an existing keyring file.
        public static let keyringExists = Code("keyring_exists")
        /// Reading, writing or syncing the keyring file failed (disk full, I/O error, ...).
        public static let keyringIO = Code("keyring_io")
        /// The new keyring file was renamed into place but its directory could not be synced: readers see it
        /// now, yet a power cut may bring the previous file back (whose bytes were therefore kept).
        public static let keyringNotDurable = Code("keyring_not_durable")
        /// The requested master key version is not in the keyring.
        public static let unknownKeyVersion = Code("unknown_key_version")
        /// The master key version is known but its secret key is absent (public-only keyring or retired version).
        public static let secretKeyUnavailable = Code("secret_key_unavailable")
        /// A key operation that would lose or leak a key was refused (rotating a public-only keyring, past the
        /// highest version, writing a keyring file that has other hard links).
        public static let keyringRefused = Code("keyring_refused")
        /// The active master key version cannot be retired.
        public static let keyVersionActive = Code("key_version_active")
        /// The keyring's custody engine cannot be reached or did not answer in time (the message names it).
        public static let custodyUnavailable = Code("custody_unavailable")
        /// The custody engine refused: a wrong token or PIN, a missing or disabled key, no permission.
        public static let custodyRefused = Code("custody_refused")
        /// The custody engine would not unwrap a wrapped secret key (altered, or moved to another keyring or
        /// version), or what it unwrapped does not match the version's public key.
        public static let wrappedKeyInvalid = Code("wrapped_key_invalid")
        /// MAC mismatch, failed decryption, binding mismatch or bad padding: the row cannot be trusted.
        public static let ciphertextInvalid = Code("ciphertext_invalid")
    }

    /// What went wrong.
    public let code: Code
    /// A PII-free, key-free explanation for an operator.
    public let message: String

    /// Makes an error. `message` must hold no key, plaintext, user identifier, name or email.
    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    init(_ code: Code, _ message: String) {
        self.init(code: code, message: message)
    }

    /// Generic and code-based: `CryptoError(ciphertext_invalid)`.
    public var description: String { "CryptoError(\(code.rawValue))" }

    static let ciphertextInvalid = CryptoError(.ciphertextInvalid, "the escrow ciphertext is invalid or was altered")
}
