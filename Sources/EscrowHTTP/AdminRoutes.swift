import EscrowCore
import EscrowCrypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import ProfileEscrow

/// `/v1/admin…`: the operator's API. Reads need `read`, requeues `operate`, erasures `erase`, the purge report
/// `audit`. Every change goes through the escrow's lifecycle with the caller's token name as actor and the reason
/// given, into the audit chain. No answer holds a name, an email or a user identifier.
struct AdminRoutes: Sendable {
    let escrow: Escrow
    let auth: BearerAuthenticator
    let overview: AdminOverviewPublisher
    let maximumBodySize: Int

    func register<Context: RequestContext>(on router: some RouterMethods<Context>) {
        router.get("overview") { request, _ in try await overview(request) }
        router.get("escrows") { request, _ in try await list(request) }
        router.post("escrows/requeue") { request, _ in try await requeueMatching(request) }
        router.get("escrows/:escrowId") { request, context in try await inspect(request, context) }
        router.delete("escrows/:escrowId") { request, context in try await erase(request, context) }
        router.post("escrows/:escrowId/requeue") { request, context in try await requeue(request, context) }
        router.get("purge-report") { request, _ in try await purgeReport(request) }
        router.post("lookup") { request, _ in try await lookup(request) }
    }

    // MARK: Reads

    func overview(_ request: Request) async throws -> Response {
        _ = try await auth.authorize(request, scope: .read)
        try Self.refuseQuery(request)
        // The custody engine's state, live: where it is and why it failed are for operators, never for `/readyz`.
        let custody = escrow.keyring.custody == nil ? nil : OverviewBody.Custody(problem: escrow.custodyHealth.problem)
        return try JSONResponse.make(.ok, encoding: OverviewBody(try await overview.latest(), custody: custody))
    }

    func list(_ request: Request) async throws -> Response {
        _ = try await auth.authorize(request, scope: .read)
        let fields = request.uri.queryParameters.map { (String($0.key), String($0.value)) }
        let input = try AdminFilterInput.parse(fields, now: escrow.configuration.clock.now())
        let page = try await escrow.list(input.filter, after: input.cursor, limit: input.limit)
        return try JSONResponse.make(.ok, encoding: ListBody(escrows: page.escrows, next: page.next))
    }

    func inspect(_ request: Request, _ context: some RequestContext) async throws -> Response {
        _ = try await auth.authorize(request, scope: .read)
        let id = try Self.escrowID(context)
        let history: EscrowHistory
        do {
            history = try await escrow.inspect(id: id, limit: 1_000)
        } catch let error as EscrowError where error.code == .notFound {
            throw Self.noSuchEscrow
        }
        return try JSONResponse.make(.ok, encoding: HistoryBody(history))
    }

    // MARK: Changes

    func requeue(_ request: Request, _ context: some RequestContext) async throws -> Response {
        let caller = try await auth.authorize(request, scope: .operate)
        let id = try Self.escrowID(context)
        let body = try await readObject(request)
        let reason = try Self.reason(body, allowing: [])
        let requeued: Bool
        do {
            requeued = try await escrow.requeue(id: id, actor: .http(token: caller.name), reason: reason)
        } catch let error as EscrowError where error.code == .notFound {
            throw Self.noSuchEscrow
        }
        _ = try? await overview.refresh()
        return JSONResponse.make(.ok, ["requeued": .bool(requeued)])
    }

    func requeueMatching(_ request: Request) async throws -> Response {
        let caller = try await auth.authorize(request, scope: .operate)
        let body = try await readObject(request)
        let reason = try Self.reason(body, allowing: Set(AdminFilterInput.filterNames))
        var fields: [(String, String)] = []
        for member in body where member.key != "reason" {
            switch member.value {
            case .string(let text): fields.append((member.key, text))
            case .number(let literal):
                // JSON Schema's integer includes 588.0 and 5.88e2: whole numbers in any notation.
                guard let number = Double(literal), number == number.rounded(), abs(number) < 1e15 else {
                    throw AdminFilterInput.invalid(field: member.key, "\(member.key) must be a whole number")
                }
                fields.append((member.key, String(Int64(number))))
            default:
                throw AdminFilterInput.invalid(field: member.key, "\(member.key) must be a string or a number")
            }
        }
        let input = try AdminFilterInput.parse(
            fields,
            now: escrow.configuration.clock.now(),
            allowed: Set(AdminFilterInput.filterNames)
        )
        if let state = input.filter.state, state != .dead {
            throw AdminFilterInput.invalid(
                field: "state",
                "only dead escrows are requeued: state must be dead or absent"
            )
        }
        let result = try await escrow.requeue(matching: input.filter, reason: reason, actor: .http(token: caller.name))
        _ = try? await overview.refresh()
        return JSONResponse.make(.ok, ["requeued": .integer(Int64(result.requeued)), "more": .bool(result.more)])
    }

    func erase(_ request: Request, _ context: some RequestContext) async throws -> Response {
        let caller = try await auth.authorize(request, scope: .erase)
        let id = try Self.escrowID(context)
        let body = try await readObject(request)
        let reason = try Self.reason(body, allowing: [])
        guard try await escrow.erase(id: id, reason: reason, actor: .http(token: caller.name)) else {
            throw Self.noSuchEscrow
        }
        _ = try? await overview.refresh()
        return Response(status: .noContent, headers: [.cacheControl: "no-store"])
    }

    // MARK: Audit and lookup

    func purgeReport(_ request: Request) async throws -> Response {
        _ = try await auth.authorize(request, scope: .audit)
        var format = "json"
        var verify = false
        for (key, value) in request.uri.queryParameters {
            switch key {
            case "format":
                guard ["text", "json", "csv", "html"].contains(value) else {
                    throw AdminFilterInput.invalid(field: "format", "format must be text, json, csv or html")
                }
                format = String(value)
            case "verify":
                guard value == "true" || value == "false" else {
                    throw AdminFilterInput.invalid(field: "verify", "verify must be true or false")
                }
                verify = value == "true"
            default:
                throw AdminFilterInput.invalid(field: nil, "unknown parameter; allowed: format, verify")
            }
        }
        return try await Self.purgeReport(escrow: escrow, format: format, verify: verify)
    }

    static func purgeReport(escrow: Escrow, format: String, verify: Bool) async throws -> Response {
        let now = escrow.configuration.clock.now()
        let report = try await PurgeReport.build(
            store: escrow.store,
            until: now,
            verify: verify,
            retentionSeconds: escrow.configuration.retention,
            now: now
        )
        let (type, body): (String, String)
        switch format {
        case "text": (type, body) = ("text/plain; charset=utf-8", report.text())
        case "csv":
            var csv = report.csvSummary() + PurgeReport.csvHeader + "\n"
            _ = try await PurgeReport.build(
                store: escrow.store,
                until: now,
                verify: false,
                now: now,
                onPurge: { csv += PurgeReport.csvRow($0) + "\n" }
            )
            (type, body) = ("text/csv; charset=utf-8", csv)
        case "html":
            let html = report.html()
            var headers = ConsolePages.securityHeaders(styleHashes: ConsolePages.styleHashes(of: html))
            headers[.contentType] = "text/html; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
        default: (type, body) = ("application/json", String(decoding: report.json(), as: UTF8.self))
        }
        return Response(
            status: .ok,
            headers: [.contentType: type, .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: body))
        )
    }

    func lookup(_ request: Request) async throws -> Response {
        _ = try await auth.authorize(request, scope: .read)
        let body = try await readObject(request)
        var identifier: String?
        for member in body {
            guard member.key == "userIdentifier", case .string(let text) = member.value else {
                throw Problem.invalidUserIdentifier
            }
            identifier = text
        }
        guard let identifier, UserIdentifier.isValid(identifier) else { throw Problem.invalidUserIdentifier }
        return JSONResponse.make(.ok, ["exists": .bool(try await escrow.hasEscrow(userIdentifier: identifier))])
    }

    // MARK: Plumbing

    static let noSuchEscrow = Problem(.notFound, code: "not_found", detail: "no escrow with this id")

    static func escrowID(_ context: some RequestContext) throws -> EscrowID {
        guard let text = context.parameters.get("escrowId"), let id = EscrowID(hex: text) else {
            throw AdminFilterInput.invalid(field: "escrowId", "escrowId must be 32 lowercase hex characters")
        }
        return id
    }

    static func refuseQuery(_ request: Request) throws {
        guard request.uri.queryParameters.isEmpty else {
            throw AdminFilterInput.invalid(field: nil, "this path takes no parameters")
        }
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
                guard case .string(let text) = member.value, let valid = OperatorReason(text) else {
                    throw AdminFilterInput.invalid(field: "reason", OperatorReason.rule)
                }
                reason = valid
            } else if !allowing.contains(member.key) {
                throw AdminFilterInput.invalid(
                    field: nil,
                    "unknown member; allowed: \((["reason"] + allowing.sorted()).joined(separator: ", "))"
                )
            }
        }
        guard let reason else {
            throw AdminFilterInput.invalid(field: "reason", "reason is required: " + OperatorReason.rule)
        }
        return reason
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
        try container.encode(next.map(AdminFilterInput.encodeCursor), forKey: .next)
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
    init(_ overview: AdminOverview, custody: Custody? = nil) {
        self.overview = overview
        self.custody = custody
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

    enum Keys: String, CodingKey {
        case generatedAt, live, oldestPendingAgeSeconds, overdue, deadByCode, last24h, history, custody
    }
    enum PointKeys: String, CodingKey { case at, pending, dead, oldestPendingAgeSeconds }
    enum WindowKeys: String, CodingKey { case captures, deliveries, purges, dead, requeued }

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
    }
}
