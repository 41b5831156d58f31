public import EscrowCore
public import EscrowCrypto

extension SQLiteEscrowStore: AppleCodeCaptureStore {
    /// Through the captures' group commit (``CaptureBatcher``), as a capture without a code: a burst of a backend's
    /// first sign-ins shares transactions and fsyncs.
    public func capture(
        _ record: EscrowRecord,
        queueing exchange: @escaping @Sendable (EscrowID) -> AppleTokenExchange,
        actor: AuditActor,
        lifecycle: EscrowLifecycle
    ) async throws -> CaptureOutcome {
        try requireWritable()
        let item = CaptureItem(record: record, actor: actor, lifecycle: lifecycle, appleExchange: exchange)
        let outcome = try await batcher.submit(item)
        // A replaced escrow's bytes leave the WAL as after any purge.
        if case .replaced = outcome { try await purgedOne() }
        return outcome
    }
}
