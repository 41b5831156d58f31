/// The lifecycle states of an escrow (SPEC §2, normative names).
public enum EscrowState: String, Sendable, Hashable, Codable, CaseIterable {
    /// Waiting for delivery (or redelivery) to the backend.
    case pending
    /// A worker holds a lease and is delivering it now.
    case leased
    /// The backend answered `202`; waiting for a confirm call.
    case awaitingConfirmation = "awaiting-confirmation"
    /// Given up: permanent rejection, attempts exhausted, or a ciphertext that fails to open.
    case dead
    /// Gone; only the audit trail remains. Never stored in a row: purging deletes the row.
    case purged

    /// The states a stored row can be in.
    public static let live: [EscrowState] = [.pending, .leased, .awaitingConfirmation, .dead]
}

/// Why an escrow was purged (SPEC §2, normative names).
public enum PurgeReason: String, Sendable, Hashable, Codable, CaseIterable {
    case confirmed
    case expired
    case revoked
    case accountDeleted = "account-deleted"
    case erased
    case replaced
}

/// Why an escrow is `dead`: a stable, PII-free code.
public struct DeadCode: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// The row failed its MAC, did not open, or was bound to another escrow.
    public static let ciphertextInvalid = DeadCode(rawValue: "ciphertext_invalid")
    /// The backend answered `410` or another permanent `4xx`.
    public static let rejected = DeadCode(rawValue: "backend_rejected")
    /// Every allowed attempt failed with a retryable outcome.
    public static let attemptsExhausted = DeadCode(rawValue: "attempts_exhausted")
}
