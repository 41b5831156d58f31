import EscrowCore
import PostgresNIO

extension PostgresEscrowStore {
    /// Ready when the server answers and takes writes: a standby in recovery (`pg_is_in_recovery()`, as after a
    /// URL that reaches the standby, or before a failover's promotion) is ``EscrowStoreError/Code/readOnly``, so that
    /// `/readyz` tells a load balancer to send captures elsewhere. Then one read of the audit head.
    public func checkReady() async throws {
        let rows = try await database.rows("readiness check failed", "SELECT pg_is_in_recovery()")
        if try rows.first?.decode(Bool.self) == true {
            throw EscrowStoreError(.readOnly, "PostgreSQL at \(url) is a standby in recovery: it takes no writes")
        }
        _ = try await auditHead()
    }
}
