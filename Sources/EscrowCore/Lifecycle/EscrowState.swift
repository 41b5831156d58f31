/// The lifecycle states of an escrow (normative names).
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
