/// Why an escrow was purged (normative names).
public enum PurgeReason: String, Sendable, Hashable, Codable, CaseIterable {
    case confirmed
    case expired
    case revoked
    case accountDeleted = "account-deleted"
    case erased
    case replaced
}
