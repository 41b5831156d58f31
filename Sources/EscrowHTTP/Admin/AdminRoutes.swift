import EscrowCore
import EscrowCrypto
import Foundation
import HTTPTypes
import Hummingbird
import ProfileEscrow

/// `/v1/admin…`: the operator's API. Reads need `read`, requeues and the delivery switch `operate`, erasures `erase`, the purge report
/// `audit`. Each route decodes its input, calls the ``OperatorActions`` the console and the CLI call too, and encodes
/// the result: every change goes through the escrow's lifecycle with the caller's token name as actor and the reason
/// given, into the audit chain. No answer holds a name, an email or a user identifier.
struct AdminRoutes: Sendable {
    let actions: OperatorActions
    let auth: BearerAuthenticator
    let maximumBodySize: Int

    /// The routes relative to `router` (`/v1/admin` in `serve`): the caller authenticated once for them all, each
    /// behind the scope its group declares.
    func register<Context: CallerRequestContext>(on router: some RouterMethods<Context>) {
        let admin = router.group().add(middleware: BearerAuthentication(auth))
        admin.group().add(middleware: RequireScope(.read))
            .get("overview") { request, _ in try await overview(request) }
            .get("escrows") { request, _ in try await list(request) }
            .get("escrows/:escrowId") { _, context in try await inspect(context) }
            .post("lookup") { request, _ in try await lookup(request) }
            .get("deliveries") { request, _ in try await deliveries(request) }
        admin.group().add(middleware: RequireScope(.operate))
            .post("escrows/requeue") { request, context in try await requeueMatching(request, context) }
            .post("escrows/:escrowId/requeue") { request, context in try await requeue(request, context) }
            .post("deliveries/pause") { request, context in
                try await switchDeliveries(paused: true, request, context)
            }
            .post("deliveries/resume") { request, context in
                try await switchDeliveries(paused: false, request, context)
            }
            .post("test-delivery") { request, context in try await testDelivery(request, context) }
        admin.group().add(middleware: RequireScope(.erase))
            .delete("escrows/:escrowId") { request, context in try await erase(request, context) }
        admin.group().add(middleware: RequireScope(.audit))
            .get("purge-report") { request, _ in try await purgeReport(request) }
    }

    // MARK: Reads

    func overview(_ request: Request) async throws -> Response {
        guard request.uri.queryParameters.isEmpty else {
            throw OperatorActions.InputError(field: nil, "this path takes no parameters")
        }
        return try JSONResponse.make(.ok, encoding: OverviewBody(try await actions.overview()))
    }

    func list(_ request: Request) async throws -> Response {
        let query = try actions.query(request.uri.queryParameters.map { (String($0.key), String($0.value)) })
        let page = try await actions.list(query)
        return try JSONResponse.make(.ok, encoding: ListBody(escrows: page.escrows, next: page.next))
    }

    func inspect(_ context: some RequestContext) async throws -> Response {
        let history = try await actions.inspect(try Self.escrowID(context))
        return try JSONResponse.make(.ok, encoding: HistoryBody(history))
    }

    func lookup(_ request: Request) async throws -> Response {
        var identifier: String?
        for member in try await readObject(request) {
            guard member.key == "userIdentifier", case .string(let text) = member.value else {
                throw Problem.invalidUserIdentifier
            }
            identifier = text
        }
        let exists = try await actions.hasEscrow(userIdentifier: try OperatorActions.userIdentifier(identifier))
        return JSONResponse.make(.ok, ["exists": .bool(exists)])
    }

    // MARK: Changes

    func requeue(_ request: Request, _ context: some CallerRequestContext) async throws -> Response {
        let caller = try context.requireCaller()
        let id = try Self.escrowID(context)
        let reason = try Self.reason(try await readObject(request), allowing: [])
        let requeued = try await actions.requeue(id, reason: reason, actor: .http(token: caller.name))
        return JSONResponse.make(.ok, ["requeued": .bool(requeued)])
    }

    func requeueMatching(_ request: Request, _ context: some CallerRequestContext) async throws -> Response {
        let caller = try context.requireCaller()
        let body = try await readObject(request)
        let reason = try Self.reason(body, allowing: Set(OperatorActions.Query.filterNames))
        var fields: [(String, String)] = []
        for member in body where member.key != "reason" {
            switch member.value {
            case .string(let text): fields.append((member.key, text))
            case .number(let literal):
                // JSON Schema's integer includes 588.0 and 5.88e2: whole numbers in any notation.
                guard let number = Double(literal), number == number.rounded(), abs(number) < 1e15 else {
                    throw OperatorActions.InputError(field: member.key, "\(member.key) must be a whole number")
                }
                fields.append((member.key, String(Int64(number))))
            default:
                throw OperatorActions.InputError(field: member.key, "\(member.key) must be a string or a number")
            }
        }
        let result = try await actions.requeue(
            matching: try actions.bulkFilter(fields),
            reason: reason,
            actor: .http(token: caller.name)
        )
        return JSONResponse.make(.ok, ["requeued": .integer(Int64(result.requeued)), "more": .bool(result.more)])
    }

    func erase(_ request: Request, _ context: some CallerRequestContext) async throws -> Response {
        let caller = try context.requireCaller()
        let id = try Self.escrowID(context)
        let reason = try Self.reason(try await readObject(request), allowing: [])
        try await actions.erase(id, reason: reason, actor: .http(token: caller.name))
        return Response(status: .noContent, headers: [.cacheControl: "no-store"])
    }

    // MARK: Audit

    func purgeReport(_ request: Request) async throws -> Response {
        var format = "json"
        var verify = false
        for (key, value) in request.uri.queryParameters {
            switch key {
            case "format":
                guard ["text", "json", "csv", "html"].contains(value) else {
                    throw OperatorActions.InputError(field: "format", "format must be text, json, csv or html")
                }
                format = String(value)
            case "verify":
                guard value == "true" || value == "false" else {
                    throw OperatorActions.InputError(field: "verify", "verify must be true or false")
                }
                verify = value == "true"
            default:
                throw OperatorActions.InputError(field: nil, "unknown parameter; allowed: format, verify")
            }
        }
        guard let plain = OperatorActions.ReportFormat(rawValue: format) else {
            return ConsolePages.response(.ok, html: try await actions.purgeReport(verify: verify).html(for: .api))
        }
        return Response(
            status: .ok,
            headers: [.contentType: plain.mediaType, .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: try await actions.purgeReport(plain, verify: verify)))
        )
    }

    // MARK: Plumbing

    static func escrowID(_ context: some RequestContext) throws -> EscrowID {
        try OperatorActions.escrowID(context.parameters.get("escrowId"))
    }

    /// The body as one JSON object's members (`{}` when empty is not allowed: a reason is always required).
    func readObject(_ request: Request) async throws -> [StrictJSON.Member] {
        try RequestBodyReader.requireJSON(request)
        let bytes = try await RequestBodyReader.read(request, limit: maximumBodySize)
        guard case .object(let members) = try? StrictJSON.parse(bytes) else {
            throw Problem(.badRequest, code: "invalid_json", detail: "the body must be one JSON object")
        }
        return members
    }

    /// The required `reason` member; any member other than it and `allowing` is refused.
    static func reason(_ members: [StrictJSON.Member], allowing: Set<String>) throws -> OperatorReason {
        var reason: OperatorReason?
        for member in members {
            if member.key == "reason" {
                guard case .string(let text) = member.value else { throw OperatorActions.InputError.invalidReason }
                reason = try OperatorActions.reason(text)
            } else if !allowing.contains(member.key) {
                throw OperatorActions.InputError(
                    field: nil,
                    "unknown member; allowed: \((["reason"] + allowing.sorted()).joined(separator: ", "))"
                )
            }
        }
        return try reason ?? OperatorActions.reason(nil)
    }
}

// MARK: - Bodies

struct ListBody: Encodable {
    var escrows: [EscrowStatus]
    var next: EscrowListPosition?

    enum Keys: String, CodingKey { case escrows, next }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(escrows, forKey: .escrows)
        try container.encode(next.map(OperatorActions.Query.encodeCursor), forKey: .next)
    }
}

struct HistoryBody: Encodable {
    var history: EscrowHistory
    init(_ history: EscrowHistory) { self.history = history }

    enum Keys: String, CodingKey { case escrowId, escrow, history }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(history.escrowID.hex, forKey: .escrowId)
        try container.encode(history.status, forKey: .escrow)
        try container.encode(history.events, forKey: .history)
    }
}

struct OverviewBody: Encodable {
    var overview: AdminOverview
    /// The keyring's custody engine, when the keyring is in custody.
    var custody: Custody?
    /// The delivery switch, as `GET /v1/admin/deliveries` answers it: what expires while deliveries are paused.
    var deliveries: DeliveriesBody
    /// Apple notifications over the window, `{type: {outcome: count}}`.
    var appleNotifications: [String: [String: Int]]
    /// Apple's tokens as the store holds them now, when it keeps them: the codes whose exchange runs, and the
    /// revocations by state (the console's figures).
    var appleTokens: AppleTokens?
    init(_ answer: OperatorActions.Overview) {
        overview = answer.overview
        custody = answer.custody.map { Custody(problem: $0.problem) }
        deliveries = DeliveriesBody(answer.deliveries)
        if answer.appleExchangesRunning != nil || answer.appleRevocations != nil {
            appleTokens = AppleTokens(
                exchangesRunning: answer.appleExchangesRunning,
                revocations: answer.appleRevocations.map {
                    AppleTokens.Revocations(pending: $0.pending, revoked: $0.revoked, failed: $0.failed)
                }
            )
        }
        appleNotifications = answer.appleNotifications.reduce(into: [:]) { byType, count in
            byType[count.type, default: [:]][count.outcome] = count.count
        }
    }

    /// `custody`: whether the engine unwrapped the keyring at the last start or reload; when not, since when, whether
    /// this node opens nothing because of it, the error's code and its message (the engine's location and the cause,
    /// never a credential).
    struct Custody: Encodable {
        var problem: KeyCustodyHealth.Problem?

        enum Keys: String, CodingKey { case up, keysUnavailable, code, message, since }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(problem == nil, forKey: .up)
            guard let problem else { return }
            try container.encode(problem.keysUnavailable, forKey: .keysUnavailable)
            try container.encode(problem.code, forKey: .code)
            try container.encode(problem.message, forKey: .message)
            try container.encode(Timestamp.milliseconds(problem.since), forKey: .since)
        }
    }

    /// `appleTokens`: `exchangesRunning`, and `revocations` `{pending, revoked, failed}`; counts only.
    struct AppleTokens: Encodable {
        var exchangesRunning: Int?
        var revocations: Revocations?

        struct Revocations: Encodable {
            var pending: Int
            var revoked: Int
            var failed: Int
        }
    }

    enum Keys: String, CodingKey {
        case generatedAt, live, oldestPendingAgeSeconds, overdue, deadByCode, last24h, history, custody, deliveries
        case appleTokens
    }
    enum PointKeys: String, CodingKey { case at, pending, dead, oldestPendingAgeSeconds }
    enum WindowKeys: String, CodingKey { case captures, deliveries, purges, dead, requeued, appleNotifications }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(Timestamp.milliseconds(overview.generatedAt), forKey: .generatedAt)
        var live: [String: Int] = [:]
        for state in EscrowState.live { live[state.rawValue] = overview.live[state] ?? 0 }
        try container.encode(live, forKey: .live)
        try container.encode(overview.oldestPendingAgeSeconds, forKey: .oldestPendingAgeSeconds)
        try container.encode(overview.overdue, forKey: .overdue)
        try container.encode(overview.deadByCode, forKey: .deadByCode)
        var window = container.nestedContainer(keyedBy: WindowKeys.self, forKey: .last24h)
        try window.encode(overview.captures, forKey: .captures)
        try window.encode(overview.deliveries, forKey: .deliveries)
        try window.encode(overview.purges, forKey: .purges)
        try window.encode(overview.died, forKey: .dead)
        try window.encode(appleNotifications, forKey: .appleNotifications)
        try window.encode(overview.requeued, forKey: .requeued)
        var history = container.nestedUnkeyedContainer(forKey: .history)
        for point in overview.history {
            var entry = history.nestedContainer(keyedBy: PointKeys.self)
            try entry.encode(Timestamp.milliseconds(point.at), forKey: .at)
            try entry.encode(point.pending, forKey: .pending)
            try entry.encode(point.dead, forKey: .dead)
            try entry.encode(point.oldestPendingAgeSeconds, forKey: .oldestPendingAgeSeconds)
        }
        try container.encodeIfPresent(custody, forKey: .custody)
        try container.encode(deliveries, forKey: .deliveries)
        try container.encodeIfPresent(appleTokens, forKey: .appleTokens)
    }
}
