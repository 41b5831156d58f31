/// The master key versions escrows are sealed to: which are in use, and which are retired for good. A retired version
/// is refused by every write of the store, whatever keyring the writing node holds.
public protocol KeyVersionStore: Sendable {
    /// How many live escrows have their key sealed to each master key version (a malformed row's version that is no
    /// 32-bit value is no version in use).
    func keyVersionsInUse() async throws -> [UInt32: Int]

    /// How many queued items are sealed to each master key version: forwarded Apple notifications not yet taken,
    /// and Apple code exchanges and token revocations still running. Each ends on its own (sent, refused or given up);
    /// until then its version cannot be retired, or the item could never be opened again.
    func queuedItemsSealed() async throws -> [UInt32: Int]

    /// Retires master key `version` in one transaction: checks that no live escrow and no queued item
    /// (``queuedItemsSealed()``) is sealed to it (else ``EscrowStoreError/Code/keyVersionInUse``), records it, and
    /// appends `audit`. From then on the store refuses
    /// every capture and change sealed to it (``EscrowStoreError/Code/keyVersionRetired``), whatever keyring the
    /// writing node holds: no escrow is ever sealed to a key nobody has. Retiring a retired version again changes
    /// nothing and appends nothing.
    func retireKeyVersion(_ version: UInt32, audit: [AuditDraft]) async throws

    /// The master key versions retired so far.
    func retiredKeyVersions() async throws -> Set<UInt32>
}

/// The statement both stores answer ``KeyVersionStore/queuedItemsSealed()`` with (and check a retirement against):
/// every queued row that holds something sealed to a master key version, counted by version.
package enum QueuedSealedItems {
    package static let countsByVersion = """
        SELECT key_version, COUNT(*) FROM (
            SELECT key_version FROM notification_outbox
            UNION ALL SELECT key_version FROM apple_token_exchange WHERE ended_at IS NULL
            UNION ALL SELECT key_version FROM apple_revocation WHERE ended_at IS NULL
        ) AS queued GROUP BY key_version
        """

    /// What a retirement refused for `count` queued items sealed to `version` says.
    package static func inUse(_ count: Int, version: UInt32) -> EscrowStoreError {
        EscrowStoreError(
            .keyVersionInUse,
            "\(count) queued item(s) (forwarded Apple notifications, Apple code exchanges or token revocations) are "
                + "still sealed to master key version \(version); they end on their own (sent, refused or given up): "
                + "retire it once they have"
        )
    }
}
