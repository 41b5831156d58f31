public import EscrowCore
public import EscrowCrypto
import Foundation

/// The behaviour every store must have, as framework-free checks: each throws ``ConformanceFailure`` when the store
/// under test breaks the contract. A store author runs them from the store's own test target, one test per check, each
/// over a new, empty store; the SQLite and PostgreSQL stores run the same lists unchanged.
///
/// With swift-testing:
///
/// ```swift
/// import EscrowStoreConformance
/// import Testing
///
/// @Test(arguments: StoreConformance.escrowChecks + StoreConformance.signInChecks)
/// func conformance(_ check: StoreConformance.Check) async throws {
///     try await check.run {
///         let store = try await MyEscrowStore.openEmpty()
///         return StoreConformance.Subject(
///             escrows: store,
///             signIns: store,
///             damage: { id, damage in try await store.damage(id, damage) }  // in the store's own SQL
///         )
///     }
/// }
/// ```
///
/// (`MyEscrowStore.openEmpty()` and `damage` stand for the store's own; `docs/writing-a-store.md` has the whole
/// contract.)
///
/// The lists follow the store protocols: ``escrowChecks`` for `EscrowStore` (every store), then one list for each
/// capability a store may offer beside it (``notificationChecks``, ``signInChecks``, ``tokenChecks``); ``all`` is every
/// list. A check of a capability the ``Subject`` lacks fails, naming it: leave its list out instead.
public enum StoreConformance {
    /// Makes a new, empty store for one check.
    public typealias MakeStore = @Sendable () async throws -> any EscrowStore
    /// Makes a new, empty store for one check, with every protocol it serves.
    public typealias MakeSubject = @Sendable () async throws -> Subject

    /// One store as the checks see it: the escrows, the capabilities it offers beside them (nil: it offers none),
    /// and a way to damage a stored row as someone with database access (but no keyring) would.
    public struct Subject: Sendable {
        public var escrows: any EscrowStore
        /// The Apple notification log and its outbox of forwarded copies (``notificationChecks``).
        public var notifications: (any NotificationOutbox)?
        /// The bearer tokens (``tokenChecks``).
        public var tokens: (any AccessTokenStore)?
        /// The web sign-in attempts (``signInChecks``).
        public var signIns: (any SignInStore)?
        /// Damages the stored row of escrow `id` in the store's own SQL (``RowDamage`` says how): the malformed-row
        /// checks of ``escrowChecks`` need it.
        public var damage: @Sendable (_ id: EscrowID, _ damage: RowDamage) async throws -> Void

        public init(
            escrows: any EscrowStore,
            notifications: (any NotificationOutbox)? = nil,
            tokens: (any AccessTokenStore)? = nil,
            signIns: (any SignInStore)? = nil,
            damage: @escaping @Sendable (_ id: EscrowID, _ damage: RowDamage) async throws -> Void
        ) {
            self.escrows = escrows
            self.notifications = notifications
            self.tokens = tokens
            self.signIns = signIns
            self.damage = damage
        }

        var outbox: any NotificationOutbox {
            get throws { try Self.required(notifications, "a NotificationOutbox", "notificationChecks") }
        }
        var tokenStore: any AccessTokenStore {
            get throws { try Self.required(tokens, "an AccessTokenStore", "tokenChecks") }
        }
        var signInStore: any SignInStore {
            get throws { try Self.required(signIns, "a SignInStore", "signInChecks") }
        }

        private static func required<T>(_ value: T?, _ what: String, _ list: String) throws -> T {
            guard let value else {
                throw ConformanceFailure("the subject has no \(what): leave StoreConformance.\(list) out of its checks")
            }
            return value
        }
    }

    /// A change to a stored row that makes it malformed; each store writes it in its own SQL.
    public enum RowDamage: Sendable, CaseIterable {
        /// `attempts = -5`: a value out of range.
        case negativeAttempts
        /// `id` set to the 15 bytes `00 01 … 0e`: no escrow id at all.
        case truncatedID
        /// `key_version = 4294967297`: outside 32 bits, no master key version at all.
        case keyVersionOutOfRange

        /// The hex of the id a ``truncatedID`` row holds.
        public static let truncatedIDHex = "000102030405060708090a0b0c0d0e"
    }

    /// One check: its name, and its body, run over the subjects `MakeSubject` makes (a new one each time it asks).
    public struct Check: Sendable, CustomStringConvertible {
        public let name: String
        public let run: @Sendable (MakeSubject) async throws -> Void
        public var description: String { name }

        init(name: String, run: @escaping @Sendable (MakeSubject) async throws -> Void) {
            self.name = name
            self.run = run
        }

        /// A check of the ``EscrowStore`` protocol alone.
        init(name: String, escrows run: @escaping @Sendable (MakeStore) async throws -> Void) {
            self.init(name: name) { make in try await run { try await make().escrows } }
        }
    }

    /// Every check, of every protocol: for a store that offers every capability, as SQLite's and PostgreSQL's do.
    public static let all: [Check] = escrowChecks + notificationChecks + signInChecks + tokenChecks
        + appleTokenChecks + appleCodeCaptureChecks

    /// The checks of ``EscrowStore``, every part of it: captures, commits and claims, malformed rows, key retirement,
    /// the audit chain with its per-escrow history and archive cuts, and the operator's reads.
    public static let escrowChecks: [Check] = coreChecks + archiveChecks + adminChecks + deliveryControlChecks
        + deliveryRateChecks + consoleSessionChecks + operatorHistoryChecks

    /// The checks of ``NotificationLog`` and ``NotificationOutbox``.
    public static let notificationChecks: [Check] =
        [Check(name: "notifications are recorded once", run: notificationsRecordedOnce)] + outboxChecks

    /// The checks of ``AccessTokenStore``.
    public static let tokenChecks: [Check] = [Check(name: "bearer tokens", run: bearerTokens)]

    static let coreChecks: [Check] = [
        Check(name: "capture stores and reads back", escrows: captureReadsBack),
        Check(name: "same content is unchanged", escrows: sameContentUnchanged),
        Check(name: "new content replaces", escrows: newContentReplaces),
        Check(name: "commit is compare-and-set", escrows: commitIsCompareAndSet),
        Check(name: "purge deletes and audits", escrows: purgeDeletesAndAudits),
        Check(name: "claim leases only due escrows once", escrows: claimLeasesDueOnce),
        Check(name: "claims only the key versions asked for", escrows: claimsOnlyTheKeyVersionsAsked),
        Check(name: "expired leases and confirm deadlines come back", escrows: expiredLeasesComeBack),
        Check(name: "concurrent claims never share an escrow", escrows: concurrentClaimsAreExclusive),
        Check(name: "queries and pagination", escrows: queriesAndPagination),
        Check(name: "audit chain is contiguous and verifies", escrows: auditChainVerifies),
        Check(name: "per-escrow audit history", escrows: perEscrowAuditHistory),
        Check(name: "summary counts", escrows: summaryCounts),
        Check(name: "concurrent captures are all durable and chained", escrows: concurrentCaptures),
        Check(name: "concurrent commits are each compare-and-set", escrows: concurrentCommitsAreEachCompareAndSet),
        Check(name: "concurrent purges of one escrow apply once", escrows: concurrentPurgesOfOneEscrowApplyOnce),
        Check(name: "key retirement", escrows: keyRetirement),
        Check(name: "malformed rows go through the lifecycle", run: malformedRows),
        Check(name: "a read quarantines each kind of malformed row once", run: malformedRowsMetByReads),
    ]
}

/// A broken expectation, with what was expected.
public struct ConformanceFailure: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws {
    if !condition { throw ConformanceFailure(message()) }
}

/// Builds sealed records with a real keyring: stores see real ciphertexts.
struct Fixture {
    let keyring = Keyring.generate()
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    func user(_ number: Int) -> String {
        "000000.conformance\(String(format: "%020d", number)).0001"
    }

    func record(
        user number: Int,
        content: String = "content",
        at date: Date? = nil,
        retention: Double = 3600,
        keyring: Keyring? = nil
    )
        throws -> EscrowRecord
    {
        let keyring = keyring ?? self.keyring
        let now = date ?? start
        let index = keyring.blindIndex(userIdentifier: user(number))
        let plaintext = SecretBytes(copying: Array("fake-profile:\(content)".utf8))
        let sealed = try keyring.seal(plaintext: plaintext, id: .random(), blindIndex: index)
        return EscrowRecord(
            sealed: sealed,
            contentTag: keyring.contentTag(blindIndex: index, plaintext: plaintext),
            createdAt: now,
            expiresAt: now.addingTimeInterval(retention)
        )
    }

    /// Captures users `0..<count` at ``start`` and leases them all to `w1` for a minute.
    func capturedAndLeased(_ count: Int, in store: any EscrowStore) async throws -> [EscrowRecord] {
        for number in 0..<count { _ = try await store.capture(try record(user: number, at: start), actor: .library) }
        let leased = try await store.claimDue(at: start, limit: count, owner: "w1", leaseDuration: 60)
        try expect(leased.count == count, "all \(count) leased: \(leased.count)")
        return leased
    }

    /// Fails unless `events` (all of `store`'s) chain up to its head.
    func expectIntactChain(_ events: [AuditEvent], of store: any EscrowStore, _ what: String) async throws {
        var verifier = AuditChain.Verifier()
        for event in events { verifier.consume(event) }
        verifier.finish(head: try await store.auditHead())
        try expect(verifier.isIntact, "\(what); broken at \(String(describing: verifier.firstBrokenSequence))")
    }

    func allEvents(_ store: any EscrowStore) async throws -> [AuditEvent] {
        var events: [AuditEvent] = []
        while true {
            let page = try await store.auditEvents(after: events.last?.sequence ?? 0, limit: 7)
            if page.isEmpty { return events }
            events += page
        }
    }
}

/// The checks' shorthand: the default lifecycle, as a store sees it from ``EscrowLifecycle``'s callers.
extension EscrowStore {
    func capture(_ record: EscrowRecord, actor: AuditActor) async throws -> CaptureOutcome {
        try await capture(record, actor: actor, lifecycle: EscrowLifecycle())
    }

    func claimDue(
        at now: Date,
        limit: Int,
        owner: String,
        leaseDuration: Double,
        keyVersions: Set<UInt32>? = nil
    ) async throws -> [EscrowRecord] {
        let request = ClaimRequest(
            now: now,
            limit: limit,
            owner: owner,
            leaseDuration: leaseDuration,
            keyVersions: keyVersions
        )
        return try await claimDue(request, lifecycle: EscrowLifecycle())
    }
}
