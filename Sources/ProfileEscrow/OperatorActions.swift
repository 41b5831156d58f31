public import EscrowCore
public import EscrowCrypto

/// What an operator does, once: the admin API (`/v1/admin/…`), the console (`/console/…`) and the CLI call these and
/// only translate their input and their result. Every change goes through the escrow's lifecycle with the actor and
/// the reason given, into the audit chain; nothing answered holds a name, an email or a user identifier. Errors are
/// the library's own, each with its ``FailureKind``; a refused input is an ``InputError``.
///
/// ```swift
/// let actions = OperatorActions(escrow: escrow, overviews: publisher)
/// let id = try OperatorActions.escrowID(path)
/// let requeued = try await actions.requeue(id, reason: try OperatorActions.reason(text), actor: .console(token: name))
/// ```
public struct OperatorActions: Sendable {
    public let escrow: Escrow
    /// Where the overview comes from; a change refreshes it. Nil in a process that publishes none (the CLI): the
    /// overview is read when asked for.
    public let overviews: AdminOverviewPublisher?
    /// The worker's delivery settings (backend URL, webhook secrets, TLS, timeout), for ``testDelivery(actor:)``; nil
    /// in a process that delivers nothing.
    public let backend: ReplayWorker.Configuration?

    /// How many events of an escrow's history ``inspect(_:historyLimit:)`` returns by default.
    public static let historyLimit = 1_000
    /// How many dead escrows one bulk requeue walks by default: a bounded request, repeated while more match.
    public static let bulkLimit = 10_000

    public init(escrow: Escrow, overviews: AdminOverviewPublisher? = nil, backend: ReplayWorker.Configuration? = nil) {
        self.escrow = escrow
        self.overviews = overviews
        self.backend = backend
    }

    // MARK: Reads

    /// The overview, with the keyring's custody engine when the keyring is in custody.
    public func overview() async throws -> Overview {
        let overview = try await latestOverview()
        // The custody engine's state, live: where it is and why it failed are for operators, never for `/readyz`.
        let custody = escrow.keyring.custody == nil ? nil : Overview.Custody(problem: escrow.custodyHealth.problem)
        return Overview(
            overview: overview,
            custody: custody,
            deliveries: try await deliveries(),
            appleNotifications: try await notificationCounts(),
            appleRevocations: try await (escrow.signIns as? any AppleRevocationStore)?.appleRevocationCounts(),
            appleExchangesRunning: try await escrow.appleTokenStore?.runningAppleExchangeCount()
        )
    }

    /// Parses a list's filters and page at the escrow's clock (see ``Query/init(_:now:allowed:emptyIsAbsent:)``).
    public func query(_ fields: [(String, String)], emptyIsAbsent: Bool = false) throws(InputError) -> Query {
        try Query(fields, now: escrow.configuration.clock.now(), emptyIsAbsent: emptyIsAbsent)
    }

    /// One page of the live escrows matching the query, oldest first.
    public func list(_ query: Query) async throws -> EscrowPage {
        try await escrow.list(query.filter, after: query.cursor, limit: query.limit)
    }

    /// Escrow `id`'s metadata and audit history. Not found (``EscrowError/Code/notFound``) when the store has neither
    /// a row nor an event for it; a malformed row is moved to dead (``EscrowError/Code/ciphertextInvalid``).
    public func inspect(_ id: EscrowID, historyLimit: Int = historyLimit) async throws -> EscrowHistory {
        try await escrow.inspect(id: id, limit: historyLimit)
    }

    /// Whether the user has a live escrow, by the blind index only: nothing about the identifier is kept.
    public func hasEscrow(userIdentifier: String) async throws -> Bool {
        try await escrow.hasEscrow(userIdentifier: try Self.userIdentifier(userIdentifier))
    }

    /// The metadata of the user's live escrow (never its content), read as `actor`; nil when nothing is held for the
    /// user. A malformed row is moved to dead (``EscrowError/Code/ciphertextInvalid``).
    public func status(userIdentifier: String, actor: AuditActor) async throws -> EscrowStatus? {
        try await escrow.status(userIdentifier: try Self.userIdentifier(userIdentifier), actor: actor)
    }

    /// Whether `text` is the id of an escrow held: an escrow id has the shape of a user identifier too, so a lookup by
    /// user that found nothing can say which the operator gave, never guess silently.
    public func isHeldEscrowID(_ text: String) async throws -> Bool {
        guard let id = EscrowID(hex: text) else { return false }
        return try await escrow.store.record(id: id) != nil
    }

    /// The keyring's versions beside the live escrows sealed to each.
    public func keys() async throws -> KeysView {
        KeysView(keyring: escrow.keyring, overview: try await latestOverview())
    }

    // MARK: Changes

    /// Brings dead escrow `id` back to `pending`; false when it is not dead. Not found when nothing is held under the
    /// id.
    public func requeue(_ id: EscrowID, reason: OperatorReason?, actor: AuditActor) async throws -> Bool {
        let requeued = try await escrow.requeue(id: id, actor: actor, reason: reason)
        await refreshOverview()
        return requeued
    }

    /// The filter of a bulk requeue, from its fields: filters only, and its state, when given, `dead`.
    public func bulkFilter(_ fields: [(String, String)]) throws(InputError) -> EscrowFilter {
        let query = try Query(
            fields,
            now: escrow.configuration.clock.now(),
            allowed: Set(Query.filterNames)
        )
        if let state = query.filter.state, state != .dead {
            throw InputError(field: "state", "only dead escrows are requeued: state must be dead or absent")
        }
        return query.filter
    }

    /// Requeues the dead escrows matching `filter`, walking at most `limit` of them (``BulkRequeue/more`` when more
    /// may match).
    public func requeue(
        matching filter: EscrowFilter,
        reason: OperatorReason?,
        actor: AuditActor,
        limit: Int = bulkLimit
    ) async throws -> BulkRequeue {
        let result = try await escrow.requeue(matching: filter, reason: reason, actor: actor, limit: limit)
        await refreshOverview()
        return result
    }

    /// Purges escrow `id` as `erased` (a malformed row too). Not found when nothing is held under the id any more.
    public func erase(_ id: EscrowID, reason: OperatorReason, actor: AuditActor) async throws {
        let erased = try await escrow.erase(id: id, reason: reason, actor: actor)
        await refreshOverview()
        guard erased else { throw EscrowError(.notFound, "no escrow with this id") }
    }

    /// Purges the user's live escrow as `erased`, with the operator's reason when given; false when nothing is held
    /// for the user.
    public func erase(userIdentifier: String, reason: OperatorReason?, actor: AuditActor) async throws -> Bool {
        let erased = try await escrow.erase(
            userIdentifier: try Self.userIdentifier(userIdentifier),
            reason: .erased,
            actor: actor,
            operatorReason: reason
        )
        await refreshOverview()
        return erased
    }

    /// The publisher's last overview, or one read now in a process without a publisher.
    private func latestOverview() async throws -> AdminOverview {
        guard let overviews else { return try await AdminOverview.read(from: escrow) }
        return try await overviews.latest()
    }

    /// After a change: the overview shows it now, not at the next publication. A failed read changes nothing done.
    func refreshOverview() async {
        _ = try? await overviews?.refresh()
    }
}
