public import EscrowCore

/// Whether the whole audit chain of `store` verifies up to its recorded head.
public func auditChainIsIntact(_ store: any EscrowStore) async throws -> Bool {
    var verifier = AuditChain.Verifier()
    var after: Int64 = 0
    while true {
        let events = try await store.auditEvents(after: after, limit: 1_000)
        guard let last = events.last else { break }
        for event in events { verifier.consume(event) }
        after = last.sequence
    }
    verifier.finish(head: try await store.auditHead())
    return verifier.isIntact
}
