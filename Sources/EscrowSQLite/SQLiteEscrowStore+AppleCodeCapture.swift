public import EscrowCore
public import EscrowCrypto

extension SQLiteEscrowStore: AppleCodeCaptureStore {
    /// In a transaction of its own, beside the captures' group commit (whose batches hold plain captures only): a
    /// capture with a code is a user's first sign-in through the backend, not the bulk of captures.
    public func capture(
        _ record: EscrowRecord,
        queueing exchange: @escaping @Sendable (EscrowID) -> AppleTokenExchange,
        actor: AuditActor,
        lifecycle: EscrowLifecycle
    ) async throws -> CaptureOutcome {
        let item = CaptureItem(record: record, actor: actor, lifecycle: lifecycle)
        let outcome = try await write { try await StoreEngine.capture(item, queueing: exchange, in: $0) }
        // A replaced escrow's bytes leave the WAL as after any purge.
        if case .replaced = outcome { try await purgedOne() }
        return outcome
    }
}
