public import EscrowCore
import EscrowCrypto
import Foundation
import Logging

extension Escrow {
    /// Records a rotation (the caller has written `rotated` to the keyring file first).
    public func recordRotation(to version: UInt32, actor: AuditActor = .cli) async throws {
        try await store.appendAudit([
            AuditDraft(type: .keysRotated, at: Date(), detail: "active version \(version)", actor: actor)
        ])
        logger.notice("master key rotated", metadata: ["key.version": "\(version)"])
    }

    /// Re-seals every escrow key that is not sealed to the active master key version. Payloads are
    /// untouched, so it is cheap. Rows that fail to open are left as they are and counted.
    /// - Returns: how many escrows were rewrapped and how many could not be.
    public func rewrap(
        actor: AuditActor = .cli,
        progress: (@Sendable (Int) -> Void)? = nil
    ) async throws -> (rewrapped: Int, failed: Int) {
        guard !keyring.isPublicOnly else {
            throw EscrowError(.captureOnly, "rewrap needs the full keyring, this one is public-only")
        }
        let active = keyring.activeVersion
        var rewrapped = 0
        var failed = 0
        var cursor: EscrowID?
        while true {
            let batch = try await store.records(.keyVersionOtherThan(active), after: cursor, limit: 500)
            guard let last = batch.last else { break }
            cursor = last.id
            for record in batch {
                guard let sealed = try? keyring.rewrap(record.sealed) else {
                    failed += 1
                    continue
                }
                var next = record
                next.sealed = sealed
                next.revision += 1
                next.updatedAt = Date()
                // A concurrent change (a worker's lease) leaves the row for the next run.
                if try await store.commit(.update(next, []), id: record.id, expectedRevision: record.revision) {
                    rewrapped += 1
                }
            }
            progress?(rewrapped)
        }
        try await store.appendAudit([
            AuditDraft(
                type: .keysRewrapped,
                at: Date(),
                detail: "to version \(active): \(rewrapped) rewrapped, \(failed) failed",
                actor: actor
            )
        ])
        return (rewrapped, failed)
    }

    /// Checks that no escrow still needs master key `version`, so its secret key may be destroyed.
    public func checkRetirable(version: UInt32) async throws {
        guard version != keyring.activeVersion else {
            throw EscrowError(.keyInUse, "version \(version) is the active master key; rotate first")
        }
        let inUse = try await store.keyVersionsInUse()[version] ?? 0
        guard inUse == 0 else {
            throw EscrowError(
                .keyInUse,
                "\(inUse) escrow(s) still use master key version \(version); run `keys rewrap` first"
            )
        }
    }

    /// Records a retirement (the caller has written the retired keyring to the keyring file first).
    public func recordRetirement(of version: UInt32, actor: AuditActor = .cli) async throws {
        try await store.appendAudit([
            AuditDraft(type: .keysRetired, at: Date(), detail: "version \(version)", actor: actor)
        ])
        logger.notice("master key retired", metadata: ["key.version": "\(version)"])
    }
}
