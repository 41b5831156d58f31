import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import InMemoryLogging
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import Testing

@testable import ProfileEscrow

/// A store with captured fake profiles, a fake backend, and workers pointed at it.
struct ReplayFixture {
    let harness: EscrowFixture
    let stub: FakeBackend
    let secret = WebhookSecret.generateText()

    static func retryPolicy(maxAttempts: Int = 50) -> RetryPolicy {
        RetryPolicy(maxAttempts: maxAttempts, base: 0.05, cap: 60)
    }

    init(maxAttempts: Int = 50, confirmTimeout: Double = 3600, retention: Double = 30 * 86400) async throws {
        var configuration = EscrowConfiguration()
        configuration.retryPolicy = Self.retryPolicy(maxAttempts: maxAttempts)
        configuration.confirmTimeout = confirmTimeout
        configuration.retention = retention
        harness = try EscrowFixture(configuration: configuration)
        stub = try await FakeBackend.start(secret: secret)
    }

    var store: SQLiteEscrowStore { harness.store }
    var escrow: Escrow { harness.escrow }

    /// The fixture's escrow, configuration and keyring over another store (a wrapper of ``store``'s escrows only).
    func escrow(over other: any EscrowStore) -> Escrow {
        Escrow(
            store: other,
            signIns: nil,
            notifications: nil,
            keyring: harness.keyring,
            configuration: escrow.configuration,
            logger: Logger(label: "test")
        )
    }

    /// The default lease and delivery timeout are generous: the loopback backend answers at once, but the whole
    /// suite runs in parallel on small machines. Tests of timeouts and leases give their own.
    func configuration(
        id: String = "w1",
        concurrency: Int = 4,
        lease: Double = 30,
        timeout: Double = 10,
        url: String? = nil
    ) throws -> ReplayWorker.Configuration {
        var configuration = try ReplayWorker.Configuration(backendURL: url ?? stub.url, webhookSecret: secret)
        configuration.workerID = id
        configuration.concurrency = concurrency
        configuration.leaseDuration = lease
        configuration.deliveryTimeout = timeout
        configuration.pollInterval = 0.02
        configuration.sweepInterval = 0.2
        return configuration
    }

    func worker(
        id: String = "w1",
        concurrency: Int = 4,
        lease: Double = 30,
        timeout: Double = 10,
        url: String? = nil
    ) throws -> ReplayWorker {
        var handler = harness.logs
        handler.logLevel = .trace
        return try ReplayWorker(
            escrow: escrow,
            configuration: configuration(id: id, concurrency: concurrency, lease: lease, timeout: timeout, url: url),
            logger: Logger(label: "test") { _ in handler }
        )
    }

    /// Captures fake profiles `range`, `ago` seconds in the past; returns their escrow ids in order.
    @discardableResult
    func capture(_ range: Range<Int>, ago seconds: Double = 0) async throws -> [EscrowID] {
        try await harness.clock.past(seconds) {
            var ids: [EscrowID] = []
            for number in range {
                ids.append(try await escrow.capture(try Fake.profile(number)).escrowID)
            }
            return ids
        }
    }

    /// Leases what is due now straight from the store, as a worker's claim does.
    func claim(owner: String, limit: Int = 1, lease: Double) async throws -> [EscrowRecord] {
        let request = ClaimRequest(now: harness.clock.now(), limit: limit, owner: owner, leaseDuration: lease)
        return try await store.claimDue(request, lifecycle: escrow.lifecycle)
    }

    func events(_ id: EscrowID) async throws -> [AuditDraft] {
        try await allEvents().filter { $0.escrowID == id.hex }
    }

    func allEvents() async throws -> [AuditDraft] {
        try await store.auditEvents(after: 0, limit: 100_000).map(\.draft)
    }

    func types(_ id: EscrowID) async throws -> [String] {
        try await events(id).map(\.type.rawValue)
    }

    func requests(_ id: EscrowID) -> [FakeBackend.Request] {
        stub.requests.filter { $0.idempotencyKey == id.hex }
    }

    /// Moves the escrow's clock just past `date` (a retry, a lease's end, a confirmation deadline) instead of
    /// waiting for it.
    func advance(past date: Date?) {
        let clock = harness.clock
        clock.advance(by: max(0, (date ?? clock.now()).timeIntervalSince(clock.now())) + 0.001)
    }

    /// Moves the escrow's clock forward.
    func advance(by seconds: Double) {
        harness.clock.advance(by: seconds)
    }

    /// No request was unsigned, mismatched, or in flight twice; nothing personal was logged.
    func expectClean(sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(stub.violations.isEmpty, "\(stub.violations.prefix(5))", sourceLocation: sourceLocation)
        let logged = harness.loggedText()
        for token in Fake.tokens {
            #expect(!logged.contains(token), "personal data logged", sourceLocation: sourceLocation)
        }
    }
}

/// A store that passes everything on, counting ``EscrowStore/flushPurged()`` and ``EscrowStore/claimDue(_:lifecycle:)``
/// calls, and holding lifecycle commits back while told to (counting those that wait).
final class ObservedStore: EscrowStore {
    let inner: SQLiteEscrowStore
    private struct State {
        var flushes = 0
        var claims = 0
        var holdingCommits = false
        /// Archive transactions still allowed before each one fails as if the connection were lost; nil: no limit.
        var archiveCommitsLeft: Int?
        /// The commits held back, each resumed when the hold ends.
        var waiting: [CheckedContinuation<Void, Never>] = []
        /// The lifecycle each ``purgeMalformed(expiredAt:actor:lifecycle:)`` was given.
        var purgeLifecycles: [EscrowLifecycle] = []
    }

    private let state = NIOLockedValueBox(State())

    init(_ inner: SQLiteEscrowStore) { self.inner = inner }

    var flushes: Int { state.withLockedValue { $0.flushes } }
    /// Claims made: a running worker makes one a poll, so they count its rounds.
    var claims: Int { state.withLockedValue { $0.claims } }
    /// Commits held back right now.
    var waitingCommits: Int { state.withLockedValue { $0.waiting.count } }
    var purgeLifecycles: [EscrowLifecycle] { state.withLockedValue { $0.purgeLifecycles } }

    /// While true, every ``commit(_:id:expectedRevision:)`` waits before it reaches the store; false lets the
    /// waiting ones go on.
    func holdCommits(_ hold: Bool) {
        let released = state.withLockedValue { state in
            state.holdingCommits = hold
            defer { if !hold { state.waiting = [] } }
            return hold ? [] : state.waiting
        }
        for waiter in released { waiter.resume() }
    }

    func flushPurged() async throws {
        state.withLockedValue { $0.flushes += 1 }
        try await inner.flushPurged()
    }

    func commit(_ action: LifecycleAction, id: EscrowID, expectedRevision: Int64) async throws -> Bool {
        await withCheckedContinuation { waiter in
            let held = state.withLockedValue { state in
                if state.holdingCommits { state.waiting.append(waiter) }
                return state.holdingCommits
            }
            if !held { waiter.resume() }
        }
        return try await inner.commit(action, id: id, expectedRevision: expectedRevision)
    }

    func capture(_ record: EscrowRecord, actor: AuditActor, lifecycle: EscrowLifecycle) async throws -> CaptureOutcome {
        try await inner.capture(record, actor: actor, lifecycle: lifecycle)
    }
    func record(id: EscrowID) async throws -> EscrowRecord? { try await inner.record(id: id) }
    func record(blindIndex: BlindIndex) async throws -> EscrowRecord? { try await inner.record(blindIndex: blindIndex) }
    func claimDue(_ request: ClaimRequest, lifecycle: EscrowLifecycle) async throws -> [EscrowRecord] {
        state.withLockedValue { $0.claims += 1 }
        return try await inner.claimDue(request, lifecycle: lifecycle)
    }
    func records(_ query: RecordQuery, after cursor: EscrowID?, limit: Int) async throws -> [EscrowRecord] {
        try await inner.records(query, after: cursor, limit: limit)
    }
    func keyVersionsInUse() async throws -> [UInt32: Int] { try await inner.keyVersionsInUse() }
    func queuedItemsSealed() async throws -> [UInt32: Int] { try await inner.queuedItemsSealed() }
    func retireKeyVersion(_ version: UInt32, audit: [AuditDraft]) async throws {
        try await inner.retireKeyVersion(version, audit: audit)
    }
    func retiredKeyVersions() async throws -> Set<UInt32> { try await inner.retiredKeyVersions() }
    func auditEvents(escrowID: String, limit: Int) async throws -> [AuditEvent] {
        try await inner.auditEvents(escrowID: escrowID, limit: limit)
    }
    func appendAudit(_ drafts: [AuditDraft]) async throws { try await inner.appendAudit(drafts) }
    func auditEvents(after sequence: Int64, limit: Int) async throws -> [AuditEvent] {
        try await inner.auditEvents(after: sequence, limit: limit)
    }
    func auditHead() async throws -> AuditHead? { try await inner.auditHead() }
    func auditCheckpoints() async throws -> [AuditCheckpoint] { try await inner.auditCheckpoints() }
    func planAuditArchive(before time: Date) async throws -> AuditArchivePlan {
        try await inner.planAuditArchive(before: time)
    }
    /// From now on, `count` archive transactions go through, and every later one fails before reaching the store.
    func failArchiveCommits(after count: Int) {
        state.withLockedValue { $0.archiveCommitsLeft = count }
    }

    func commitAuditArchive(_ plan: AuditArchivePlan, checkpoint: AuditCheckpoint, audit: [AuditDraft]) async throws {
        let allowed = state.withLockedValue { state -> Bool in
            guard let left = state.archiveCommitsLeft else { return true }
            state.archiveCommitsLeft = max(0, left - 1)
            return left > 0
        }
        guard allowed else { throw EscrowStoreError(.unavailable, "the connection was lost (on purpose)") }
        try await inner.commitAuditArchive(plan, checkpoint: checkpoint, audit: audit)
    }
    func summary(at now: Date) async throws -> StoreSummary { try await inner.summary(at: now) }
    func list(_ filter: EscrowFilter, after position: EscrowListPosition?, limit: Int) async throws -> [EscrowRecord] {
        try await inner.list(filter, after: position, limit: limit)
    }
    func auditCounts(since: Date) async throws -> [AuditCount] { try await inner.auditCounts(since: since) }
    func lastAuditEvent(of types: [AuditEventType]) async throws -> Date? {
        try await inner.lastAuditEvent(of: types)
    }
    func purgeMalformed(expiredAt now: Date, actor: AuditActor, lifecycle: EscrowLifecycle) async throws -> Int {
        state.withLockedValue { $0.purgeLifecycles.append(lifecycle) }
        return try await inner.purgeMalformed(expiredAt: now, actor: actor, lifecycle: lifecycle)
    }
    func malformedRow(blindIndex: BlindIndex) async throws -> MalformedEscrowRow? {
        try await inner.malformedRow(blindIndex: blindIndex)
    }
    func malformedRow(id: EscrowID) async throws -> MalformedEscrowRow? { try await inner.malformedRow(id: id) }
    func auditTallies(after sequence: Int64, limit: Int) async throws -> [AuditTally] {
        try await inner.auditTallies(after: sequence, limit: limit)
    }
    func checkReady() async throws { try await inner.checkReady() }
    func deliveryControl() async throws -> DeliveryControl { try await inner.deliveryControl() }
    func setDeliveriesPaused(_ paused: Bool, audit: AuditDraft) async throws -> Bool {
        try await inner.setDeliveriesPaused(paused, audit: audit)
    }
    func escrowCount(expiringBefore date: Date) async throws -> Int {
        try await inner.escrowCount(expiringBefore: date)
    }
    func deliveryRate() async throws -> DeliveryRate { try await inner.deliveryRate() }
    func recordNotificationEvent(_ event: NotificationEvent) async throws {
        try await inner.recordNotificationEvent(event)
    }
    func notificationEvents(limit: Int) async throws -> [NotificationEvent] {
        try await inner.notificationEvents(limit: limit)
    }
    func notificationEventCounts(since: Date) async throws -> [NotificationEventCount] {
        try await inner.notificationEventCounts(since: since)
    }
    func advanceDeliverySlot(from expected: Int64, to nextSlot: Int64, perSecond: Double?) async throws -> Bool {
        try await inner.advanceDeliverySlot(from: expected, to: nextSlot, perSecond: perSecond)
    }
    func commit(_ action: MalformedRowAction, on row: MalformedEscrowRow) async throws -> Bool {
        try await inner.commit(action, on: row)
    }
}
