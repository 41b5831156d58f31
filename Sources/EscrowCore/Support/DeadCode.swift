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
