public import EscrowCore
public import EscrowCrypto

extension PostgresEscrowStore: AppleCodeCaptureStore {
    /// In a transaction of its own, beside the captures' group commit (whose batches hold plain captures only): a
    /// capture with a code is a user's first sign-in through the backend, not the bulk of captures.
    public func capture(
        _ record: EscrowRecord,
        queueing exchange: @escaping @Sendable (EscrowID) -> AppleTokenExchange,
        actor: AuditActor,
        lifecycle: EscrowLifecycle
    ) async throws -> CaptureOutcome {
        try requireWritable()
        let item = CaptureItem(record: record, actor: actor, lifecycle: lifecycle)
        return try await Self.engineTransaction(database, "capturing with an Apple code failed") {
            try await StoreEngine.capture(item, queueing: exchange, in: $0)
        }
    }
}
