public import EscrowCrypto
public import Foundation

/// Rows that do not decode into an ``EscrowRecord`` (damaged, or written by hand): a store describes them as a
/// ``MalformedEscrowRow`` and applies what ``EscrowLifecycle`` decides for them, as it does for records. Such a row is
/// never a crash, a stalled worker or an unavailable store: it is quarantined as `dead` (`ciphertext_invalid`) when met,
/// and deleted on erasure, on a replacing capture and at retention.
public protocol MalformedRowStore: Sendable {
    /// The user's live row when it does not decode into a record (``EscrowRecordStore/record(blindIndex:)`` then
    /// throws ``EscrowStoreError/Code/malformedRow``); nil when none is stored, or when it decodes.
    func malformedRow(blindIndex: BlindIndex) async throws -> MalformedEscrowRow?

    /// The row of escrow `id` when it does not decode into a record (``EscrowRecordStore/record(id:)`` then throws
    /// ``EscrowStoreError/Code/malformedRow``); nil when none is stored, or when it decodes. (A row whose id column is
    /// what is broken is found by its user, with ``malformedRow(blindIndex:)``, never by an id.)
    func malformedRow(id: EscrowID) async throws -> MalformedEscrowRow?

    /// Applies what the lifecycle decided for a malformed row, addressed by its row id, with its audit events in the
    /// same transaction. Returns whether the row was still there.
    func commit(_ action: MalformedRowAction, on row: MalformedEscrowRow) async throws -> Bool

    /// Purges, as `expired`, every stored row past its retention at `now` that does not decode into a record, with the
    /// action `lifecycle` gives for ``MalformedRowEvent/purge(_:)``: retention holds for them too. Returns how many.
    func purgeMalformed(expiredAt now: Date, actor: AuditActor, lifecycle: EscrowLifecycle) async throws -> Int
}
