public import EscrowCore
public import EscrowCrypto

extension PostgresEscrowStore: AppleCodeCaptureStore {
    /// Through the captures' group commit, as a capture without a code: a burst of a backend's first sign-ins
    /// shares transactions.
    public func capture(
        _ record: EscrowRecord,
        queueing exchange: @escaping @Sendable (EscrowID) -> AppleTokenExchange,
        actor: AuditActor,
        lifecycle: EscrowLifecycle
    ) async throws -> CaptureOutcome {
        try requireWritable()
        return try await captures.submit(
            CaptureItem(record: record, actor: actor, lifecycle: lifecycle, appleExchange: exchange),
            deadline: StoreDatabase.callerDeadline
        )
    }
}
