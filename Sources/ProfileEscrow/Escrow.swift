public import EscrowCore
public import EscrowCrypto
import Foundation
public import Logging
import NIOConcurrencyHelpers
import Tracing

/// The keychain pattern, on the server: capture the one-time profile before registering, replay it
/// until the backend confirms, then purge it. What registration services link.
///
/// ```swift
/// let escrow = Escrow(store: store, keyring: keyring, logger: logger)
/// let receipt = try await escrow.capture(profile)          // before calling the backend
/// // ... registration succeeded:
/// try await escrow.confirm(userIdentifier: profile.userIdentifier)
/// ```
public final class Escrow: Sendable {
    public let store: any EscrowStore
    /// The store's web sign-in attempts, when it keeps them: ``sweep(actor:progress:)`` deletes the spent ones.
    public let signIns: (any SignInStore)?
    /// The store's handled Apple notifications and their outbox, when it keeps them: ``sweep(actor:progress:)``
    /// deletes the entries past the outbox's retention.
    public let notifications: (any NotificationOutbox)?
    public let configuration: EscrowConfiguration
    private let currentKeyring: NIOLockedValueBox<Keyring>
    let logger: Logger
    /// The one place that decides how an escrow changes; every change is committed by ``commit(_:on:metadata:)``.
    let lifecycle: EscrowLifecycle
    let clock: any WallClock
    /// The keyring's custody engine as the last reload found it (``KeyringReloader``; `/readyz`).
    public let custodyHealth = KeyCustodyHealth()

    /// An escrow over a store that keeps the escrows only, or whose other capabilities are given apart: each is said,
    /// nil included, so that none is left out by accident (``sweep(actor:progress:)`` would skip it silently). Over a
    /// store that keeps all three, ``init(store:keyring:configuration:logger:)`` passes it for each.
    ///
    /// - Parameters:
    ///   - store: where the escrows live.
    ///   - signIns: the web sign-in attempts beside them, when the store keeps them; nil when it keeps none.
    ///   - notifications: the Apple notification log and outbox beside them, likewise; nil when it keeps none.
    public init(
        store: any EscrowStore,
        signIns: (any SignInStore)?,
        notifications: (any NotificationOutbox)?,
        keyring: Keyring,
        configuration: EscrowConfiguration = EscrowConfiguration(),
        logger: Logger
    ) {
        self.store = store
        self.signIns = signIns
        self.notifications = notifications
        self.currentKeyring = NIOLockedValueBox(keyring)
        self.configuration = configuration
        self.logger = logger
        self.lifecycle = configuration.lifecycle
        self.clock = configuration.clock
        configuration.sealingKeys?.prepare(for: keyring)
    }

    /// An escrow over a store that also keeps the web sign-in attempts and the Apple notifications' outbox (SQLite's
    /// and PostgreSQL's stores do): the store is its ``signIns`` and ``notifications`` too, so its sweep cleans all
    /// three.
    public convenience init(
        store: some EscrowStore & SignInStore & NotificationOutbox,
        keyring: Keyring,
        configuration: EscrowConfiguration = EscrowConfiguration(),
        logger: Logger
    ) {
        self.init(
            store: store,
            signIns: store,
            notifications: store,
            keyring: keyring,
            configuration: configuration,
            logger: logger
        )
    }

    /// The keyring in use now; ``replaceKeyring(_:)`` swaps it (a reload after a rotation or retirement).
    public var keyring: Keyring { currentKeyring.withLockedValue { $0 } }

    /// Puts `new` in place of the keyring, for every operation from now on. Refused (nothing changes) when its
    /// index or row key differs: every stored escrow would become unreachable.
    public func replaceKeyring(_ new: Keyring) throws(EscrowError) {
        let replaced = currentKeyring.withLockedValue { current -> Bool in
            guard current.sharesIndexAndRowKeys(with: new) else { return false }
            current = new
            return true
        }
        guard replaced else {
            throw EscrowError(
                .invalidConfiguration,
                "the new keyring has another index or row key than the one in use: it belongs to another store, "
                    + "and was not loaded"
            )
        }
        configuration.sealingKeys?.prepare(for: new)
    }

    /// Whether this node can only capture (public-only keyring): it never opens an escrow.
    public var isCaptureOnly: Bool { keyring.isPublicOnly }

    // MARK: Capture

    /// Parses and validates a profile JSON body, then captures it. The identity token, if any, is not
    /// checked here (see verified capture in the HTTP service); the escrow is recorded as unverified, and an
    /// `authorizationCode` is refused (``ProfileInput/requireNoAuthorizationCode()``).
    public func capture(json body: some Collection<UInt8>, actor: AuditActor = .library) async throws -> CaptureReceipt
    {
        let input = try ProfileParser.parse(body)
        try input.requireNoAuthorizationCode()
        return try await capture(input.profile, verified: false, actor: actor)
    }

    /// Seals `profile` and stores it durably; returns once the row is on disk.
    ///
    /// At most one live escrow per user: the same content again changes nothing; new content
    /// replaces the previous escrow (purged as `replaced`).
    ///
    /// - Parameters:
    ///   - emailVerified: where the profile's email came from, when the caller knows: `true` when Apple signed it (an
    ///     identity token's `email` claim), `false` when only the user or the app gave it. Delivered with the profile
    ///     (`emailVerified`); nil records nothing.
    ///   - appleExchange: the exchange of the Apple authorization code that came with a verified profile
    ///     (``appleExchange(code:clientID:redirectURI:now:)``), sealed with the escrow and queued in the capture's own
    ///     transaction (the store must be an `AppleCodeCaptureStore`); the escrow's first delivery is then held until
    ///     the exchange ends or the code expires, so that it carries the refresh token.
    public func capture(
        _ profile: Profile,
        verified: Bool = false,
        emailVerified: Bool? = nil,
        appleExchange: AppleCodeExchange? = nil,
        actor: AuditActor = .library
    ) async throws -> CaptureReceipt {
        try await EscrowTracing.withSpan(configuration.tracer, "escrow.capture") { span in
            let receipt = try await captureUntraced(
                profile,
                verified: verified,
                emailVerified: emailVerified,
                appleExchange: appleExchange,
                actor: actor
            )
            span?.attributes["escrow.id"] = receipt.escrowID.hex
            span?.attributes["escrow.capture.outcome"] = receipt.outcome.rawValue
            return receipt
        }
    }

    private func captureUntraced(
        _ profile: Profile,
        verified: Bool,
        emailVerified: Bool?,
        appleExchange code: AppleCodeExchange?,
        actor: AuditActor
    ) async throws -> CaptureReceipt {
        let tracer = configuration.tracer
        var (record, appleExchange) = try EscrowTracing.withSpan(tracer, "escrow.seal") {
            try sealedRecord(profile, verified: verified, emailVerified: emailVerified, appleCode: code, now: clock.now())
        }
        // The first delivery waits for the code's exchange: ending it makes the escrow due at once.
        if appleExchange != nil {
            record.nextAttemptAt = record.createdAt.addingTimeInterval(AppleTokenExchange.codeLifetime)
        }
        let outcome: CaptureOutcome
        do {
            outcome = try await EscrowTracing.withSpan(tracer, "escrow.commit") { [record] _ in
                guard let appleExchange else {
                    return try await store.capture(record, actor: actor, lifecycle: lifecycle)
                }
                guard let codes = store as? any AppleCodeCaptureStore else {
                    throw EscrowError(.invalidConfiguration, "this store cannot queue an Apple code with a capture")
                }
                return try await codes.capture(record, queueing: appleExchange, actor: actor, lifecycle: lifecycle)
            }
        } catch let error as EscrowStoreError {
            EscrowMetrics.captureFailed(error.code.rawValue)
            guard error.code == .keyVersionRetired else { throw error }
            logger.error(
                "refusing to capture: this node's keyring seals to a retired master key version; reload the keyring",
                metadata: ["key.version": "\(record.sealed.keyVersion)"]
            )
            throw EscrowError(
                .keyringOutdated,
                "this node's keyring seals to master key version \(record.sealed.keyVersion), which is retired: the "
                    + "capture was not stored; reload the keyring (SIGHUP) or update the keyring file"
            )
        } catch {
            EscrowMetrics.captureFailed("unexpected")
            throw error
        }
        let stored = outcome.record
        let receiptOutcome: CaptureReceipt.Outcome
        switch outcome {
        case .created: receiptOutcome = .created
        case .unchanged: receiptOutcome = .unchanged
        case .replaced(_, let previous):
            receiptOutcome = .replaced
            EscrowMetrics.purged(.replaced)
            logger.info(
                "escrow replaced",
                metadata: ["escrow.id": "\(previous)", "escrow.replacement": "\(stored.id)"]
            )
        }
        if receiptOutcome != .unchanged { EscrowMetrics.captured() }
        // Debug, as the swift-server log level guidelines ask of a library's per-operation events: every capture
        // is already an audit event and a metric (and, in the service, an access log line).
        logger.debug(
            "escrow captured",
            metadata: [
                "escrow.id": "\(stored.id)", "escrow.index": "\(stored.blindIndex.prefixHex)",
                "outcome": "\(receiptOutcome.rawValue)",
            ]
        )
        return CaptureReceipt(
            escrowID: stored.id,
            state: stored.state,
            expiresAt: stored.expiresAt,
            outcome: receiptOutcome
        )
    }

    /// Seals a new escrow row. Synchronous on purpose: every plaintext buffer is released before the
    /// capture waits for its commit (under a burst, thousands wait at once; a buffer held across that
    /// wait would defeat the pool of locked buffers and cost an mmap, mprotect and mlock each).
    func sealedRecord(
        _ profile: Profile,
        verified: Bool,
        emailVerified: Bool? = nil,
        transferSub: String? = nil,
        now: Date
    ) throws -> EscrowRecord {
        try sealedRecord(
            profile,
            verified: verified,
            emailVerified: emailVerified,
            transferSub: transferSub,
            appleCode: nil,
            now: now
        ).record
    }

    /// ``sealedRecord(_:verified:emailVerified:transferSub:now:)``, and the outbox entry of `appleCode` when one came
    /// with the profile: the code sealed beside the escrow, with its keys.
    func sealedRecord(
        _ profile: Profile,
        verified: Bool,
        emailVerified: Bool? = nil,
        transferSub: String? = nil,
        appleCode: AppleCodeExchange?,
        now: Date
    ) throws -> (record: EscrowRecord, appleExchange: (@Sendable (EscrowID) -> AppleTokenExchange)?) {
        let keyring = self.keyring  // one keyring for the whole capture, even across a reload
        let blindIndex = keyring.blindIndex(userIdentifier: profile.userIdentifier)
        let plaintext = EscrowPlaintext(
            profile: profile,
            verified: verified,
            capturedAt: now,
            emailVerified: emailVerified,
            transferSub: transferSub
        ).encoded()
        let (sealed, code) = try keyring.seal(
            plaintext: plaintext,
            id: EscrowID.new(at: now),
            blindIndex: blindIndex,
            reserve: configuration.sealingKeys,
            appleCode: appleCode.map { ($0.code, Hex.encode($0.codeHash)) }
        )
        let record = EscrowRecord(
            sealed: sealed,
            contentTag: keyring.contentTag(
                blindIndex: blindIndex,
                plaintext: Self.contentPlaintext(profile, verified, emailVerified, transferSub)
            ),
            createdAt: now,
            expiresAt: now.addingTimeInterval(configuration.retention)
        )
        let appleExchange = code.flatMap { code in
            appleCode?.entry(keyVersion: code.keyVersion, sealedCode: code.sealed)
        }
        return (record, appleExchange)
    }

    /// The content fingerprint ignores the capture time, so that the same profile captured twice
    /// is recognised as the same content.
    static func contentPlaintext(
        _ profile: Profile,
        _ verified: Bool,
        _ emailVerified: Bool? = nil,
        _ transferSub: String? = nil
    ) -> SecretBytes {
        EscrowPlaintext(
            profile: profile,
            verified: verified,
            capturedAt: Date(timeIntervalSince1970: 0),
            emailVerified: emailVerified,
            transferSub: transferSub
        ).encoded()
    }

    // MARK: Read back

    /// Opens the user's escrow: the keychain pattern's read-back, for a registration service that
    /// retries by itself. A row that fails to open is moved to `dead` (`ciphertext_invalid`).
    public func replay(userIdentifier: String, actor: AuditActor = .library) async throws -> EscrowPlaintext {
        guard
            let record = try await userRecord(blindIndex(userIdentifier), ifMalformed: .quarantine, actor: actor).record
        else {
            throw EscrowError(.notFound, "no escrow is held for this user")
        }
        return try await open(record, actor: actor)
    }

    /// The user's live row as ``userRecord(_:ifMalformed:actor:)`` found it.
    enum UserRow {
        case record(EscrowRecord)
        case none
        /// The row did not decode and was deleted through the lifecycle.
        case purgedMalformed

        var record: EscrowRecord? {
            if case .record(let record) = self { return record }
            return nil
        }
    }

    /// The user's live record. A stored row that does not decode is never answered as an unavailable store: it is
    /// handled through the lifecycle like a forged one, quarantined as `dead` (`ciphertext_invalid`, then thrown as
    /// ``EscrowError/Code/ciphertextInvalid``) or, for a purge, deleted (``UserRow/purgedMalformed``).
    func userRecord(
        _ index: BlindIndex,
        ifMalformed event: MalformedRowEvent,
        actor: AuditActor
    ) async throws -> UserRow {
        let store = self.store
        return try await storedRecord(
            read: { try await store.record(blindIndex: index) },
            malformed: { try await store.malformedRow(blindIndex: index) },
            ifMalformed: event,
            actor: actor
        )
    }

    /// Escrow `id`'s record, as ``userRecord(_:ifMalformed:actor:)`` finds a user's: a row that does not decode is
    /// handled through the lifecycle (the operator's by-id routes: inspect, requeue, erase).
    func idRecord(_ id: EscrowID, ifMalformed event: MalformedRowEvent, actor: AuditActor) async throws -> UserRow {
        let store = self.store
        return try await storedRecord(
            read: { try await store.record(id: id) },
            malformed: { try await store.malformedRow(id: id) },
            ifMalformed: event,
            actor: actor
        )
    }

    private func storedRecord(
        read: () async throws -> EscrowRecord?,
        malformed: () async throws -> MalformedEscrowRow?,
        ifMalformed event: MalformedRowEvent,
        actor: AuditActor
    ) async throws -> UserRow {
        do {
            return try await read().map(UserRow.record) ?? .none
        } catch let error as EscrowStoreError where error.code == .malformedRow {
            guard let row = try await malformed() else {
                // Gone (or rewritten) meanwhile: read it again.
                return try await read().map(UserRow.record) ?? .none
            }
            let action = lifecycle.handle(event, on: row, at: clock.now(), actor: actor)
            let applied: Bool
            do {
                applied = try await store.commit(action, on: row)
            } catch let error as EscrowStoreError where error.code == .readOnly {
                // A read-only store (`status` on a read-only folder): say what the row is, change nothing.
                applied = false
            }
            var metadata: Logger.Metadata = ["escrow.index": "\(row.indexPrefix ?? "")", "column": "\(row.column)"]
            if let id = row.escrowIDHex { metadata["escrow.id"] = "\(id)" }
            switch event {
            case .purge(let reason):
                metadata["reason"] = "\(reason.rawValue)"
                if applied { EscrowMetrics.purged(reason) }
                logger.warning("malformed escrow row purged", metadata: metadata)
                return applied ? .purgedMalformed : .none
            case .quarantine:
                if applied, !row.isQuarantined { EscrowMetrics.dead(.ciphertextInvalid) }
                logger.error("malformed escrow row moved to dead", metadata: metadata)
                throw EscrowError(
                    .ciphertextInvalid,
                    "the stored escrow is malformed (column \(row.column)) and was moved to dead"
                )
            }
        }
    }

    /// Opens a stored record. A failed MAC, open or binding check moves the escrow to `dead`.
    public func open(_ record: EscrowRecord, actor: AuditActor) async throws -> EscrowPlaintext {
        let keyring = self.keyring
        guard !keyring.isPublicOnly else {
            throw EscrowError(.captureOnly, "this node holds a public-only keyring and cannot open escrows")
        }
        do {
            let plaintext = try keyring.open(record.sealed)
            return try EscrowPlaintext.decode(plaintext)
        } catch let error as CryptoError where error.code == .secretKeyUnavailable || error.code == .unknownKeyVersion {
            // The row is intact (its MAC passed); this keyring cannot open it. Never mark it dead for that.
            throw EscrowError(
                .keyUnavailable,
                "master key version \(record.sealed.keyVersion) is not available in this keyring (retired, "
                    + "public-only, or an out-of-date keyring file)"
            )
        } catch {
            logger.error(
                "escrow failed to open",
                metadata: ["escrow.id": "\(record.id)", "escrow.index": "\(record.blindIndex.prefixHex)"]
            )
            try await commit(lifecycle.handle(.tampered, on: record, at: clock.now(), actor: actor), on: record)
            throw EscrowError(.ciphertextInvalid, "the stored escrow failed its integrity check and was moved to dead")
        }
    }

    /// Metadata of the user's live escrow, or nil.
    public func status(userIdentifier: String, actor: AuditActor = .library) async throws -> EscrowStatus? {
        try await userRecord(blindIndex(userIdentifier), ifMalformed: .quarantine, actor: actor).record
            .map(EscrowStatus.init)
    }

    // MARK: Purge

    /// Success, then purge: the backend registered the user. Returns whether an escrow was held.
    @discardableResult
    public func confirm(userIdentifier: String, actor: AuditActor = .library) async throws -> Bool {
        try await apply(.confirm, toUser: userIdentifier, actor: actor)
    }

    /// Purges the user's escrow for `reason` (`erased` by default). Returns whether one was held.
    @discardableResult
    public func erase(
        userIdentifier: String,
        reason: PurgeReason = .erased,
        actor: AuditActor = .library,
        operatorReason: OperatorReason? = nil
    ) async throws -> Bool {
        try await apply(.purge(reason), toUser: userIdentifier, actor: actor, operatorReason: operatorReason)
    }

    /// Purges every escrow past its retention as `expired` (malformed rows too, through the configured lifecycle);
    /// returns how many. Also deletes the spent web sign-in attempts of ``signIns`` and the outbox entries of
    /// ``notifications`` past the outbox's retention, when this escrow was given them; and ended console sessions.
    @discardableResult
    public func sweep(
        actor: AuditActor = .library,
        progress: (@Sendable (Int) -> Void)? = nil
    ) async throws -> Int {
        let now = clock.now()
        var purged = 0
        while true {
            let batch = try await store.records(.expired(at: now), after: nil, limit: 500)
            if batch.isEmpty { break }
            var progressed = false
            for record in batch where try await apply(.purge(.expired), to: record, actor: actor) == .applied {
                purged += 1
                progressed = true
            }
            progress?(purged)
            if !progressed { break }
        }
        // Rows too broken to be records (quarantined as dead) are past retention too: purged by the store.
        purged += try await store.purgeMalformed(expiredAt: now, actor: actor, lifecycle: lifecycle)
        if purged > 0 { logger.info("swept expired escrows", metadata: ["count": "\(purged)"]) }
        // Web sign-in attempts past their life and their ticket's: hashes and sealed bytes only, no audit event.
        if let signIns {
            // Kept for the resubmission grace past their expiry: a callback received in time may still complete.
            let attempts = try await signIns.sweepSignInAttempts(
                at: now.addingTimeInterval(-SignInAttempt.resubmissionGrace)
            )
            if attempts > 0 { logger.info("swept expired sign-in attempts", metadata: ["count": "\(attempts)"]) }
        }
        // Forwarded Apple notifications past the outbox's retention, whether a forwarder runs or not.
        if let notifications { try await notifications.sweepExpired(at: now, logger: logger) }
        // Console sessions past their idle or absolute end (hashes only, no audit event).
        let sessions = try await store.sweepConsoleSessions(now: now, idle: ConsoleSessionLimits.idle)
        if sessions > 0 { logger.info("swept ended console sessions", metadata: ["count": "\(sessions)"]) }
        return purged
    }

    /// Checks the MAC of every due escrow sealed to a master key version this keyring cannot open, and moves each
    /// one whose MAC fails to `dead` (`ciphertext_invalid`). A worker claims only what it can open, so without
    /// this a row whose key version was altered to one nobody holds would stay `pending` for ever; the MAC covers
    /// the key version, so such a row fails it here. A row whose MAC holds is left for a worker that can open it.
    /// The MAC needs no secret key: any keyring checks it. Returns how many were moved to dead.
    @discardableResult
    public func quarantineForgedUnopenable(actor: AuditActor = .library) async throws -> Int {
        let keyring = self.keyring
        let openable = Set(keyring.keys.filter(\.hasSecretKey).map(\.version))
        let now = clock.now()
        var moved = 0
        var cursor: EscrowID?
        while true {
            let batch = try await store.records(.dueSealedToNoneOf(openable, at: now), after: cursor, limit: 500)
            guard let last = batch.last else { break }
            cursor = last.id
            for record in batch where !keyring.verify(record.sealed) {
                logger.error(
                    "escrow failed its integrity check",
                    metadata: ["escrow.id": "\(record.id)", "escrow.index": "\(record.blindIndex.prefixHex)"]
                )
                if try await apply(.tampered, to: record, actor: actor) == .applied { moved += 1 }
            }
        }
        return moved
    }

    /// Brings a dead escrow back to `pending`. Returns false when it is not dead.
    @discardableResult
    public func requeue(id: EscrowID, actor: AuditActor = .library, reason: OperatorReason? = nil) async throws -> Bool
    {
        for _ in 0..<8 {
            guard let record = try await idRecord(id, ifMalformed: .quarantine, actor: actor).record else {
                throw EscrowError(.notFound, "no escrow with this id")
            }
            switch try await apply(.requeue, to: record, actor: actor, reason: reason) {
            case .applied: return true
            case .ignored: return false
            case .stale: continue
            }
        }
        throw EscrowError(.conflict, "the escrow kept changing; try again")
    }

    /// Brings the user's dead escrow back to `pending`. Returns false when the escrow is not dead; throws
    /// ``EscrowError/Code/notFound`` when nothing is held.
    @discardableResult
    public func requeue(userIdentifier: String, actor: AuditActor = .library) async throws -> Bool {
        guard
            let record = try await userRecord(blindIndex(userIdentifier), ifMalformed: .quarantine, actor: actor).record
        else {
            throw EscrowError(.notFound, "no escrow is held for this user")
        }
        return try await apply(.requeue, to: record, actor: actor) == .applied
    }

    /// Requeues every dead escrow; returns how many.
    @discardableResult
    public func requeueAllDead(actor: AuditActor = .library, reason: OperatorReason? = nil) async throws -> Int {
        var count = 0
        var cursor: EscrowID?
        while true {
            let batch = try await store.records(.state(.dead), after: cursor, limit: 500)
            guard let last = batch.last else { break }
            for record in batch where try await apply(.requeue, to: record, actor: actor, reason: reason) == .applied {
                count += 1
            }
            cursor = last.id
        }
        return count
    }

    // MARK: Plumbing

    func blindIndex(_ userIdentifier: String) -> BlindIndex {
        keyring.blindIndex(userIdentifier: userIdentifier)
    }

    private func apply(
        _ event: LifecycleEvent,
        toUser userIdentifier: String,
        actor: AuditActor,
        operatorReason: OperatorReason? = nil
    ) async throws -> Bool {
        let index = blindIndex(userIdentifier)
        // A malformed row can never be delivered: a confirmation or an erasure deletes it, anything else quarantines it.
        let ifMalformed: MalformedRowEvent =
            switch event {
            case .confirm: .purge(.confirmed)
            case .purge(let reason): .purge(reason)
            default: .quarantine
            }
        for _ in 0..<8 {
            let row = try await userRecord(index, ifMalformed: ifMalformed, actor: actor)
            if case .purgedMalformed = row { return true }
            guard let record = row.record else { return false }
            switch try await apply(event, to: record, actor: actor, reason: operatorReason) {
            case .applied: return true
            case .ignored: return false
            case .stale: continue  // it changed under us (a worker leased it, say): read it again
            }
        }
        throw EscrowError(.conflict, "the escrow kept changing; try again")
    }

    /// What became of a lifecycle action.
    enum CommitResult: Equatable {
        /// Written, with its audit events.
        case applied
        /// The lifecycle said nothing changes.
        case ignored(LifecycleRejection)
        /// The escrow changed since it was read (compare-and-set lost): nothing was written.
        case stale
    }

    /// Applies one lifecycle event to `record` as read, with compare-and-set.
    func apply(
        _ event: LifecycleEvent,
        to record: EscrowRecord,
        actor: AuditActor,
        reason: OperatorReason? = nil
    ) async throws -> CommitResult {
        try await commit(
            lifecycle.handle(event, on: record, at: clock.now(), actor: actor).withReason(reason),
            on: record
        )
    }

    /// Commits a lifecycle action for `record` with compare-and-set on its revision (the fencing rule),
    /// then counts and logs what it did. Every change of an escrow goes through here.
    @discardableResult
    func commit(
        _ action: LifecycleAction,
        on record: EscrowRecord,
        metadata: Logger.Metadata = [:]
    ) async throws
        -> CommitResult
    {
        if case .ignore(let why) = action.change { return .ignored(why) }
        guard try await store.commit(action, id: record.id, expectedRevision: record.revision) else { return .stale }
        var metadata = metadata
        // A replay's delivery names them already.
        if metadata["escrow.id"] == nil { metadata["escrow.id"] = .string(record.id.hex) }
        if metadata["escrow.index"] == nil { metadata["escrow.index"] = .string(record.blindIndex.prefixHex) }
        switch action.change {
        case .purge(let reason, _):
            EscrowMetrics.purged(reason)
            metadata["reason"] = "\(reason.rawValue)"
            logger.info("escrow purged", metadata: metadata)
        case .update(let next, _):
            if let code = next.deadCode, record.deadCode != code {
                EscrowMetrics.dead(code)
                metadata["code"] = "\(code.rawValue)"
                logger.warning("escrow is dead", metadata: metadata)
            }
        case .ignore:
            break
        }
        return .applied
    }
}
