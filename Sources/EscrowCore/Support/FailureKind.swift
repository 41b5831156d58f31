public import EscrowCrypto

/// What kind of failure an error is: decided once, here, for every door an operator or a client comes through. The
/// HTTP API (problem+json), the operator console (its error page) and the CLI (its exit code) each switch on it in one
/// place, so the same error is answered alike everywhere:
///
/// | kind          | HTTP status | console page | CLI exit | meaning                                                  |
/// |---------------|-------------|--------------|----------|----------------------------------------------------------|
/// | `badInput`    | 400         | 400          | 2        | the caller's input breaks a rule (a refused key operation too) |
/// | `tooLarge`    | 413         | 413          | 2        | the input is over its size limit                         |
/// | `unauthorized`| 401         | sign-in page | 2        | no valid credential                                      |
/// | `forbidden`   | 403         | 403          | 2        | a valid credential without the right                     |
/// | `notFound`    | 404         | 404          | 3        | nothing is held under this name (an unknown key version too) |
/// | `conflict`    | 409         | 409          | 4        | the escrow or this node cannot do it now: another attempt, or another node, can |
/// | `damaged`     | 409         | 409          | 1        | a stored row is malformed or failed its integrity check: no retry helps |
/// | `unavailable` | 503         | 503          | 4        | the store, the keyring or its custody engine did not answer; try again |
/// | `internal`    | 500         | 500          | 1        | anything else: a fault of ours                           |
///
/// A conflict exits 4 as a busy store does: both say "nothing was done; try again", never "your input was wrong".
/// Messages stay each error's own, PII-free by design; the kind only chooses the status and the exit code.
public enum FailureKind: String, Sendable, Hashable, CaseIterable {
    case badInput = "bad_input"
    case tooLarge = "too_large"
    case unauthorized
    case forbidden
    case notFound = "not_found"
    case conflict
    case damaged
    case unavailable
    case `internal`

    /// The kind of any error: its own when it is ours (``ClassifiedFailure``), else ``internal``.
    public init(of error: any Error) {
        self = (error as? any ClassifiedFailure)?.failureKind ?? .internal
    }

    /// The HTTP status of the API's problem answer and of the console's error page.
    public var httpStatus: Int {
        switch self {
        case .badInput: 400
        case .tooLarge: 413
        case .unauthorized: 401
        case .forbidden: 403
        case .notFound: 404
        case .conflict, .damaged: 409
        case .unavailable: 503
        case .internal: 500
        }
    }

    /// The CLI's exit code: 1 a problem found, 2 bad usage or input, 3 not found, 4 store or keyring unavailable.
    public var exitCode: Int32 {
        switch self {
        case .badInput, .tooLarge, .unauthorized, .forbidden: 2
        case .notFound: 3
        case .conflict, .unavailable: 4
        case .damaged, .internal: 1
        }
    }
}

/// An error that knows its ``FailureKind``. Every error type of the library conforms; read the kind of any error with
/// ``FailureKind/init(of:)``.
public protocol ClassifiedFailure: Error {
    var failureKind: FailureKind { get }
}

extension ProfileValidationError: ClassifiedFailure {
    public var failureKind: FailureKind { code == .bodyTooLarge ? .tooLarge : .badInput }
}

extension StrictJSONError: ClassifiedFailure {
    public var failureKind: FailureKind { .badInput }
}

extension EscrowStoreError: ClassifiedFailure {
    public var failureKind: FailureKind {
        switch code {
        // A row that does not decode: the store answered, the row is broken. Never "unavailable".
        case .malformedRow: .damaged
        // A name already taken, a key version still sealing escrows: the caller asked for what cannot be.
        case .tokenExists, .keyVersionInUse: .badInput
        // Sealed to a retired key version: this node's keyring is out of date; once reloaded (or on another node)
        // the same request succeeds.
        default: .unavailable
        }
    }
}

extension CryptoError: ClassifiedFailure {
    public var failureKind: FailureKind {
        switch code {
        case .keyringNotFound, .keyringPermissions, .keyringMalformed, .keyringIO, .keyringNotDurable,
            .secretKeyUnavailable, .custodyUnavailable, .custodyRefused, .wrappedKeyInvalid:
            .unavailable
        case .unknownKeyVersion: .notFound
        case .ciphertextInvalid: .damaged
        // A key operation refused (it would lose or leak a key), an existing keyring file.
        default: .badInput
        }
    }
}
