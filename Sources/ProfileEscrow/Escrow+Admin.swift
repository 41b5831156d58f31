public import EscrowCore
public import EscrowCrypto
import Foundation

/// One page of the operator's list (``Escrow/list(_:after:limit:)``).
public struct EscrowPage: Sendable, Equatable {
    public var escrows: [EscrowStatus]
    /// Where the next page starts; nil on the last page.
    public var next: EscrowListPosition?
}

/// What a requeue by filter did (``Escrow/requeue(matching:reason:actor:limit:)``).
public struct BulkRequeue: Sendable, Equatable {
    public var requeued: Int
    /// The walk stopped at its limit: more dead escrows may match.
    public var more: Bool
}

extension Escrow {
    /// The most a page of ``list(_:after:limit:)`` holds.
    public static let maximumPageSize = 500

    /// A keyset page of the live escrows matching `filter`, oldest first (by creation, then id): at most `limit`
    /// (1-``maximumPageSize``), and where the next page starts.
    public func list(_ filter: EscrowFilter, after position: EscrowListPosition?, limit: Int) async throws -> EscrowPage
    {
        let limit = min(max(limit, 1), Self.maximumPageSize)
        // One more than asked: tells whether a next page exists without an empty last page.
        let records = try await store.list(filter, after: position, limit: limit + 1)
        let page = records.prefix(limit)
        return EscrowPage(
            escrows: page.map(EscrowStatus.init),
            next: records.count > limit ? page.last.map(EscrowListPosition.init(after:)) : nil
        )
    }

    /// Purges escrow `id` as `erased`, with the operator's reason on its audit event. Returns false when nothing is
    /// held under this id any more.
    @discardableResult
    public func erase(id: EscrowID, reason: OperatorReason, actor: AuditActor) async throws -> Bool {
        for _ in 0..<8 {
            // A row that does not decode is deleted as erased through the lifecycle, as a user's is.
            let row = try await idRecord(id, ifMalformed: .purge(.erased), actor: actor)
            if case .purgedMalformed = row { return true }
            guard let record = row.record else { return false }
            switch try await apply(.purge(.erased), to: record, actor: actor, reason: reason) {
            case .applied: return true
            case .ignored: return false
            case .stale: continue
            }
        }
        throw EscrowError(.conflict, "the escrow kept changing; try again")
    }

    /// Requeues every dead escrow matching `filter` (its state, when given, must be `dead`), each with the
    /// operator's reason, walking at most `limit` of them: a bounded request, repeated while ``BulkRequeue/more``.
    public func requeue(
        matching filter: EscrowFilter,
        reason: OperatorReason?,
        actor: AuditActor,
        limit: Int = 10_000
    ) async throws -> BulkRequeue {
        guard filter.state == nil || filter.state == .dead else { return BulkRequeue(requeued: 0, more: false) }
        var filter = filter
        filter.state = .dead
        var requeued = 0
        var seen = 0
        var position: EscrowListPosition?
        while seen < limit {
            let batch = try await store.list(filter, after: position, limit: min(500, limit - seen))
            guard let last = batch.last else { return BulkRequeue(requeued: requeued, more: false) }
            position = EscrowListPosition(after: last)
            seen += batch.count
            for record in batch where try await apply(.requeue, to: record, actor: actor, reason: reason) == .applied {
                requeued += 1
            }
        }
        return BulkRequeue(requeued: requeued, more: !(try await store.list(filter, after: position, limit: 1)).isEmpty)
    }

    /// Whether the user has a live escrow (a malformed row counts), by the blind index of the identifier: nothing is
    /// changed, nothing about the identifier is kept.
    public func hasEscrow(userIdentifier: String) async throws -> Bool {
        let index = blindIndex(userIdentifier)
        do {
            return try await store.record(blindIndex: index) != nil
        } catch let error as EscrowStoreError where error.code == .malformedRow {
            return true
        }
    }
}
