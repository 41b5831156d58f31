public import EscrowCore
public import EscrowCrypto
import Logging

extension Escrow {
    /// Adds a new active master key version: writes the rotated keyring to `keyringPath` first, then
    /// records `keys-rotated` (an audit event never claims a rotation that did not happen). New
    /// captures seal to the new version once the keyring file is read again; ``rewrap(actor:progress:)``
    /// with the returned keyring moves existing escrows.
    /// - Returns: the rotated keyring.
    public func rotateKeys(keyringPath: String, actor: AuditActor = .cli) async throws -> Keyring {
        guard !keyring.isPublicOnly else {
            throw EscrowError(.captureOnly, "a public-only keyring cannot be rotated")
        }
        let rotated = keyring.rotated(now: clock.now())
        try rotated.write(path: keyringPath, overwrite: true)
        try await store.appendAudit([
            AuditDraft(
                type: .keysRotated,
                at: clock.now(),
                detail: "active version \(rotated.activeVersion)",
                actor: actor
            )
        ])
        logger.notice("master key rotated", metadata: ["key.version": "\(rotated.activeVersion)"])
        return rotated
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
                // A concurrent change (a worker's lease) leaves the row for the next run.
                if try await apply(.rewrap(sealed), to: record, actor: actor) == .applied { rewrapped += 1 }
            }
            progress?(rewrapped)
        }
        try await store.appendAudit([
            AuditDraft(
                type: .keysRewrapped,
                at: clock.now(),
                detail: "to version \(active): \(rewrapped) rewrapped, \(failed) failed",
                actor: actor
            )
        ])
        return (rewrapped, failed)
    }

    /// Checks that no escrow still needs master key `version`, so its secret key may be destroyed.
    public func checkRetirable(version: UInt32) async throws {
        guard keyring.keys.contains(where: { $0.version == version }) else {
            throw EscrowError(.notFound, "master key version \(version) is not in this keyring")
        }
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

    /// Destroys master key `version`'s secret key once no escrow uses it: checks, writes the retired
    /// keyring to `keyringPath`, then records `keys-retired`.
    /// - Returns: the keyring without that secret key.
    public func retireKey(version: UInt32, keyringPath: String, actor: AuditActor = .cli) async throws -> Keyring {
        try await checkRetirable(version: version)
        let retired = try keyring.retiring(version: version)
        try retired.write(path: keyringPath, overwrite: true)
        try await store.appendAudit([
            AuditDraft(type: .keysRetired, at: clock.now(), detail: "version \(version)", actor: actor)
        ])
        logger.notice("master key retired", metadata: ["key.version": "\(version)"])
        return retired
    }
}
