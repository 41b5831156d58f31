public import EscrowCore
public import EscrowCrypto
import EscrowCustody
import Foundation
import Logging

extension Escrow {
    /// Adds a new active master key version, in two steps, each written to `keyringPath` (temporary file, `fsync`,
    /// rename, folder `fsync`): first the new version **staged**, not active, so that running nodes that reload
    /// the file hold its secret key but seal nothing to it; then, only once that file is known durable, the new
    /// version made active. So no node ever seals to a version whose secret key a power cut could take away.
    /// Then `keys-rotated` is recorded (an audit event never claims a rotation that did not happen). New captures
    /// seal to the new version once the keyring file is read again; ``rewrap(actor:progress:)`` with the returned
    /// keyring moves existing escrows.
    ///
    /// When the first step's folder sync fails, nothing is rotated: the error (``CryptoError/Code/keyringNotDurable``)
    /// says so, and running it again finishes the job with the same staged version. When the second step's fails,
    /// the rotation has happened (recorded, marked "file not synced"), and a power cut can only bring back the staged
    /// file, where the new version's secret key is: every escrow sealed to it still opens.
    /// - Returns: the rotated keyring.
    public func rotateKeys(keyringPath: String, actor: AuditActor = .cli) async throws -> Keyring {
        let keyring = self.keyring
        guard !keyring.isPublicOnly else {
            throw EscrowError(.captureOnly, "a public-only keyring cannot be rotated")
        }
        // In custody, the new secret key is wrapped by the engine before the file is written (it never is in plain).
        var staged = try keyring.staged(now: clock.now())
        if let custody = staged.custody {
            staged = try await staged.wrappingNewKeys(by: KeyringCustody.custodian(for: custody))
        }
        guard let version = staged.stagedVersion else {
            throw EscrowError(.invalidConfiguration, "the keyring has no new version to make active")
        }
        // Step 1: the new version on disk, not active. Until this is durable no node may seal to it.
        do {
            try staged.write(path: keyringPath, overwrite: true)
        } catch {
            guard error.code == .keyringNotDurable else { throw error }
            logger.error(
                "master key not rotated: the keyring file with the new version was not synced; no node seals to it",
                metadata: ["key.version": "\(version)", "key.active": "\(keyring.activeVersion)"]
            )
            throw CryptoError(
                code: .keyringNotDurable,
                message:
                    "\(error.message). Nothing was rotated: version \(version) is in the file only as a staged key, not "
                    + "active, so no node seals to it (version \(keyring.activeVersion) stays active); run "
                    + "`keys rotate` again once the disk is fixed"
            )
        }
        // Step 2: the new version active. Its secret key is durable (step 1): a power cut can at most undo this step.
        let rotated = try staged.promoting(version: version)
        var notDurable: CryptoError?
        do {
            try rotated.write(path: keyringPath, overwrite: true)
        } catch {
            guard error.code == .keyringNotDurable else { throw error }
            notDurable = error
        }
        try replaceKeyring(rotated)
        var detail = "active version \(rotated.activeVersion)"
        if notDurable != nil { detail += " (file not synced)" }
        try await store.appendAudit([AuditDraft(type: .keysRotated, at: clock.now(), detail: detail, actor: actor)])
        if let notDurable {
            logger.error(
                "master key rotated, keyring file not synced",
                metadata: ["key.version": "\(rotated.activeVersion)"]
            )
            throw CryptoError(
                code: .keyringNotDurable,
                message:
                    "\(notDurable.message). The rotation is in effect: version \(version) is active; its secret key is on "
                    + "disk (written and synced as a staged key first), so a power cut can at most make version "
                    + "\(keyring.activeVersion) active again, and every escrow sealed to \(version) still opens"
            )
        }
        logger.notice("master key rotated", metadata: ["key.version": "\(rotated.activeVersion)"])
        return rotated
    }

    /// Puts `new` (the same keys, moved into, out of or within custody) in place: writes it to `keyringPath`, uses
    /// it from now on, then records `keys-custody-changed` with `detail` (which names the engine, never a secret).
    public func changeCustody(
        to new: Keyring,
        keyringPath: String,
        detail: String,
        actor: AuditActor = .cli
    ) async throws {
        try new.write(path: keyringPath, overwrite: true)
        try replaceKeyring(new)
        try await store.appendAudit([
            AuditDraft(type: .keysCustodyChanged, at: clock.now(), detail: detail, actor: actor)
        ])
        logger.notice("keyring custody changed", metadata: ["custody": "\(new.custody?.kind ?? "none")"])
    }

    /// Re-seals every escrow key that is not sealed to the active master key version. Payloads are
    /// untouched, so it is cheap. Rows that fail to open are left as they are and counted.
    /// - Returns: how many escrows were rewrapped and how many could not be.
    public func rewrap(
        actor: AuditActor = .cli,
        progress: (@Sendable (Int) -> Void)? = nil
    ) async throws -> (rewrapped: Int, failed: Int) {
        let keyring = self.keyring
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

    /// Checks that master key `version` may be retired here: in this keyring and not the active one. Whether an
    /// escrow still uses it is checked by the store, atomically, when it is retired.
    public func checkRetirable(version: UInt32) throws(EscrowError) {
        let keyring = self.keyring
        guard keyring.keys.contains(where: { $0.version == version }) else {
            throw EscrowError(.notFound, "master key version \(version) is not in this keyring")
        }
        guard version != keyring.activeVersion else {
            throw EscrowError(.keyInUse, "version \(version) is the active master key; rotate first")
        }
    }

    /// Destroys master key `version`'s secret key once no escrow uses it. First the store retires the version
    /// (in one transaction: no live escrow is sealed to it, the retirement and its `keys-retired` event are
    /// recorded, and from then on no node can store anything sealed to it), then the keyring file is
    /// rewritten without the secret key. Running it again after a failed file write finishes the job.
    /// - Returns: the keyring without that secret key.
    public func retireKey(version: UInt32, keyringPath: String, actor: AuditActor = .cli) async throws -> Keyring {
        try checkRetirable(version: version)
        let retired = try keyring.retiring(version: version)
        do {
            try await store.retireKeyVersion(
                version,
                audit: [AuditDraft(type: .keysRetired, at: clock.now(), detail: "version \(version)", actor: actor)]
            )
        } catch let error as EscrowStoreError where error.code == .keyVersionInUse {
            throw EscrowError(.keyInUse, error.message)
        }
        do {
            try retired.write(path: keyringPath, overwrite: true)
        } catch {
            throw EscrowError(
                .invalidConfiguration,
                "the store records master key version \(version) as retired, but the keyring file was not rewritten "
                    + "(\(error.message)): run `keys retire \(version)` again"
            )
        }
        try replaceKeyring(retired)
        logger.notice("master key retired", metadata: ["key.version": "\(version)"])
        return retired
    }

    /// What ``cycleKeys(keyringPath:actor:progress:)`` did.
    public struct KeyCycle: Sendable, Equatable {
        /// The new active version.
        public var activeVersion: UInt32
        public var rewrapped: Int
        /// Escrows whose key could not be re-sealed (they keep their version, which is then not retired).
        public var failed: Int
        /// Versions whose secret key was destroyed.
        public var retired: [UInt32]
        /// Versions kept because live escrows or queued items (forwarded notifications, Apple code exchanges and
        /// revocations) still use them, with how many: queued items end on their own, so a later cycle retires them.
        public var kept: [UInt32: Int]
    }

    /// One key cycle: rotate, wait `grace` so that every running node reloads the keyring file and seals to the
    /// new version (a node still sealing to a retired one would be refused), rewrap every escrow to the new
    /// version, then retire every older version that no live escrow uses. Run on a schedule, it bounds how long
    /// any copy of a purged escrow (a backup, a database's WAL or dead tuples) stays readable: one cycle period.
    public func cycleKeys(
        keyringPath: String,
        grace: Duration = .zero,
        actor: AuditActor = .cli,
        progress: (@Sendable (Int) -> Void)? = nil
    ) async throws -> KeyCycle {
        let rotated = try await rotateKeys(keyringPath: keyringPath, actor: actor)
        if grace > .zero { try await clock.sleep(for: grace) }
        let (rewrapped, failed) = try await rewrap(actor: actor, progress: progress)
        let inUse = try await versionsHeld()
        var cycle = KeyCycle(
            activeVersion: rotated.activeVersion,
            rewrapped: rewrapped,
            failed: failed,
            retired: [],
            kept: [:]
        )
        for key in rotated.keys where key.version != rotated.activeVersion && key.hasSecretKey {
            if let count = inUse[key.version], count > 0 {
                cycle.kept[key.version] = count
                continue
            }
            do {
                _ = try await retireKey(version: key.version, keyringPath: keyringPath, actor: actor)
                cycle.retired.append(key.version)
            } catch let error as EscrowError where error.code == .keyInUse {
                // An escrow was sealed to it meanwhile (a node still on the old keyring): the next cycle retires it.
                cycle.kept[key.version] = try await versionsHeld()[key.version] ?? 0
            }
        }
        return cycle
    }

    /// How many live escrows and queued items (forwarded notifications, Apple code exchanges and revocations) are
    /// sealed to each master key version: what keeps a version from being retired.
    private func versionsHeld() async throws -> [UInt32: Int] {
        try await store.keyVersionsInUse().merging(try await store.queuedItemsSealed(), uniquingKeysWith: +)
    }
}
