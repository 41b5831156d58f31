public import EscrowCrypto

/// A capture that carries Apple's authorization code (a verified API capture's): the profile captured and the code
/// queued for its exchange (``AppleTokenStore``) in one transaction, so that neither is durable without the other. The
/// record says how long its first delivery is held (its due time, the code's expiry); ending the exchange makes it due
/// at once, as for a sign-in's capture.
///
/// The `EscrowStoreConformance` module holds the checks every implementation must pass.
public protocol AppleCodeCaptureStore: Sendable {
    /// ``EscrowRecordStore/capture(_:actor:lifecycle:)``, and in the same transaction the exchange `exchange` makes for
    /// the escrow that holds the profile (created, replacing, or the same content kept), queued unless that escrow
    /// has one for its code. Durable before it returns; a store may commit it with other captures (a group commit).
    func capture(
        _ record: EscrowRecord,
        queueing exchange: @escaping @Sendable (EscrowID) -> AppleTokenExchange,
        actor: AuditActor,
        lifecycle: EscrowLifecycle
    ) async throws -> CaptureOutcome
}
