import EscrowCore

extension SQLiteEscrowStore {
    /// Refuses once the store's file met a disk error, or for a few seconds after a write found the disk full
    /// (``DiskFailure``); else one read of the audit head.
    public func checkReady() async throws {
        if let writeLock {
            try DiskFailure.check(writeLock.databaseKey)
            try DiskFailure.checkSpace(writeLock.databaseKey)
        }
        _ = try await auditHead()
    }
}
