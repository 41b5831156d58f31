/// The master key versions escrows are sealed to: which are in use, and which are retired for good. A retired version
/// is refused by every write of the store, whatever keyring the writing node holds.
public protocol KeyVersionStore: Sendable {
    /// How many live escrows have their key sealed to each master key version (a malformed row's version that is no
    /// 32-bit value is no version in use).
    func keyVersionsInUse() async throws -> [UInt32: Int]

    /// Retires master key `version` in one transaction: checks that no live escrow is sealed to it (else
    /// ``EscrowStoreError/Code/keyVersionInUse``), records it, and appends `audit`. From then on the store refuses
    /// every capture and change sealed to it (``EscrowStoreError/Code/keyVersionRetired``), whatever keyring the
    /// writing node holds: no escrow is ever sealed to a key nobody has. Retiring a retired version again changes
    /// nothing and appends nothing.
    func retireKeyVersion(_ version: UInt32, audit: [AuditDraft]) async throws

    /// The master key versions retired so far.
    func retiredKeyVersions() async throws -> Set<UInt32>
}
