import EscrowCore
import EscrowCrypto
import Foundation
import Hummingbird
import Mustache
import ProfileEscrow

/// The console's pages and forms: each decodes its input, calls ``OperatorActions`` and renders its template over a
/// plain struct of the page's values.
extension ConsoleRoutes {
    /// `console-overview`'s values: the summary a viewer (`read`) sees, or nil for a role without it.
    struct Overview {
        struct Section {
            var heading: String
            var chart: Chart?
        }

        struct Summary {
            var asOf: String
            var cards: [Card]
            var sections: [Section]
            var backlog: Chart?
            var deliveries: Deliveries
        }

        /// The delivery switch, and for an operator the form that flips it (with a reason).
        struct Deliveries {
            var kind: String
            var state: String
            var expiring: String
            /// The cluster's delivery rate limit, as the workers recorded it.
            var rate: String
            var action: String
            var buttonID: String
            var button: String
            var hint: String

            init(_ view: OperatorActions.DeliveriesView) {
                let control = view.control
                let since = control.changedAt.map { " since \(ConsolePages.time($0))" } ?? ""
                let by = control.changedBy.map { " by \($0)" } ?? ""
                let why = control.reason.map { ": \($0)" } ?? ""
                let hours = Int(OperatorActions.expiringWindow / 3600)
                expiring =
                    "\(view.expiringWhilePaused) escrows expire within \(hours) hours, delivered or not: retention is "
                    + "not held while deliveries are paused."
                rate =
                    view.ratePerSecond.map { "At most \($0.formatted()) deliveries a second, for every node together." }
                    ?? "No delivery rate limit (each worker's concurrency only)."
                if control.paused {
                    kind = "error"
                    state = "Paused\(since)\(by)\(why)"
                    action = "/console/deliveries/resume"
                    buttonID = "resume-deliveries"
                    button = "Resume deliveries"
                    hint = "Every worker on every node claims again at its next poll."
                } else {
                    kind = "ok"
                    state = control.changedAt == nil ? "Running" : "Running (resumed\(since)\(by)\(why))"
                    action = "/console/deliveries/pause"
                    buttonID = "pause-deliveries"
                    button = "Pause deliveries"
                    hint = "Every worker on every node stops claiming within one poll; captures go on."
                }
            }
        }

        var summary: Summary?
    }

    func home(_ viewer: ConsolePages.Viewer) async throws -> Response {
        guard viewer.may(.read) else {
            return ConsolePages.render("console-overview", title: "Console", viewer: viewer, Overview())
        }
        let answer = try await actions.overview()
        let overview = answer.overview
        let states = EscrowState.live.enumerated().map { index, state in
            (state.rawValue, overview.live[state] ?? 0, index % Chart.paletteSize)
        }
        let summary = Overview.Summary(
            asOf: ConsolePages.time(overview.generatedAt),
            cards: [
                Card(label: "Live escrows", value: "\(overview.live.values.reduce(0, +))", id: "live"),
                Card(
                    label: "Oldest pending",
                    value: ConsolePages.age(overview.oldestPendingAgeSeconds),
                    id: "oldest-pending"
                ),
                Card(label: "Dead", value: "\(overview.live[.dead] ?? 0)", id: "dead"),
                Card(label: "Captures, 24 h", value: "\(overview.captures)", id: "captures"),
            ],
            sections: [
                .init(heading: "Live by state", chart: Chart.bars("live escrows by state", states)),
                .init(
                    heading: "Dead by code",
                    chart: Chart.bars("dead escrows by code", ConsolePages.colored(overview.deadByCode))
                ),
                .init(
                    heading: "Deliveries, 24 h",
                    chart: Chart.bars("deliveries by outcome", ConsolePages.colored(overview.deliveries))
                ),
                .init(
                    heading: "Purges, 24 h",
                    chart: Chart.bars("purges by reason", ConsolePages.colored(overview.purges))
                ),
                .init(
                    heading: "Apple notifications, 24 h",
                    chart: Chart.bars(
                        "Apple notifications by type and outcome",
                        ConsolePages.colored(Self.notificationBars(answer.appleNotifications))
                    )
                ),
            ] + Self.revocationSection(answer.appleRevocations),
            backlog: Chart.lines(
                "pending and dead escrows over time",
                times: overview.history.map(\.at),
                series: [(overview.history.map(\.pending), 0), (overview.history.map(\.dead), 3)]
            ),
            deliveries: Overview.Deliveries(answer.deliveries)
        )
        return ConsolePages.render("console-overview", title: "Overview", viewer: viewer, Overview(summary: summary))
    }

    /// The Apple token revocations the store holds, by state (none when the store keeps none): counts only.
    static func revocationSection(_ counts: AppleRevocationCounts?) -> [Overview.Section] {
        guard let counts else { return [] }
        let bars = [("pending", counts.pending, 0), ("revoked", counts.revoked, 1), ("failed", counts.failed, 3)]
        return [.init(heading: "Apple token revocations", chart: Chart.bars("Apple token revocations by state", bars))]
    }

    /// `console-escrows`' values: the filter form as given, one page of escrows, the links on, and the filter again
    /// as the bulk requeue's hidden fields.
    struct EscrowList {
        struct StateOption {
            var state: String
            var selected: Bool
        }

        struct Field {
            var name: String
            var label: String
            var size: Int
            var value: String
        }

        struct Given {
            var name: String
            var value: String
        }

        struct Row {
            var id: String
            var state: String
            var attempts: Int
            var created: String
            var expires: String
            var keyVersion: Int
            var deadCode: String
            var lastStatus: String
        }

        var states: [StateOption]
        var fields: [Field]
        var limit: Int
        var rows: [Row]
        var next: String?
        var first: String?
        var given: [Given]
    }

    func list(_ request: Request, _ viewer: ConsolePages.Viewer) async throws -> Response {
        let fields = request.uri.queryParameters.map { (String($0.key), String($0.value)) }
        let input = try actions.query(fields, emptyIsAbsent: true)
        let page = try await actions.list(input)
        let given = input.given.map { EscrowList.Given(name: $0.name, value: $0.value) }
        func field(_ name: String, _ label: String, size: Int = 10) -> EscrowList.Field {
            .init(name: name, label: label, size: size, value: given.first { $0.name == name }?.value ?? "")
        }
        let filterQuery = input.given.map { "\($0.name)=\(ConsolePages.query($0.value))" }
        let next = page.next.map { next in
            "/console/escrows?"
                + (filterQuery + ["limit=\(input.limit)", "cursor=\(OperatorActions.Query.encodeCursor(next))"])
                .joined(separator: "&")
        }
        let list = EscrowList(
            states: EscrowState.live.map { .init(state: $0.rawValue, selected: input.filter.state == $0) },
            fields: [
                field("minAgeSeconds", "Min age (s)"), field("keyVersion", "Key version", size: 5),
                field("deadCode", "Dead code", size: 18), field("minAttempts", "Min attempts", size: 5),
            ],
            limit: input.limit,
            rows: page.escrows.map { status in
                EscrowList.Row(
                    id: status.escrowID.hex,
                    state: status.state.rawValue,
                    attempts: status.attempts,
                    created: ConsolePages.time(status.createdAt),
                    expires: ConsolePages.time(status.expiresAt),
                    keyVersion: Int(status.keyVersion),
                    deadCode: status.deadCode?.rawValue ?? "",
                    lastStatus: status.lastStatus.map(String.init) ?? ""
                )
            },
            next: next,
            first: input.cursor == nil ? nil : "/console/escrows?" + filterQuery.joined(separator: "&"),
            given: given
        )
        return ConsolePages.render("console-escrows", title: "Escrows", viewer: viewer, list)
    }

    /// `console-escrow`'s values: the escrow's metadata while it is held (nil once purged), its history, and the
    /// notice of the action just done.
    struct EscrowPage {
        struct Metadata {
            struct Row {
                var name: String
                var value: String
            }

            var rows: [Row]
            var requeues: Bool
        }

        struct Event {
            var sequence: Int64
            var time: String
            var type: String
            var detail: String
            var httpStatus: String
            var actor: String
            var reason: String
        }

        var id: String
        var notice: String?
        var metadata: Metadata?
        var events: [Event]
    }

    func escrowPage(id: EscrowID, _ viewer: ConsolePages.Viewer, notice: String? = nil) async throws -> Response {
        let history = try await actions.inspect(id)
        let metadata = history.status.map { status in
            EscrowPage.Metadata(
                rows: [
                    ("State", status.state.rawValue), ("Attempts", "\(status.attempts)"),
                    ("Next attempt", ConsolePages.time(status.nextAttemptAt)),
                    ("Created", ConsolePages.time(status.createdAt)), ("Expires", ConsolePages.time(status.expiresAt)),
                    ("Key version", "\(status.keyVersion)"), ("Dead code", status.deadCode?.rawValue ?? "-"),
                    ("Last status", status.lastStatus.map(String.init) ?? "-"),
                ].map { EscrowPage.Metadata.Row(name: $0.0, value: $0.1) },
                requeues: viewer.may(.operate) && status.state == .dead
            )
        }
        let page = EscrowPage(
            id: id.hex,
            notice: notice,
            metadata: metadata,
            events: history.events.map { event in
                EscrowPage.Event(
                    sequence: event.sequence,
                    time: ConsolePages.time(event.at),
                    type: event.type.rawValue,
                    detail: event.detail ?? "",
                    httpStatus: event.httpStatus.map(String.init) ?? "",
                    actor: event.actor.rawValue,
                    reason: event.reason ?? ""
                )
            }
        )
        return ConsolePages.render("console-escrow", title: "Escrow", viewer: viewer, page)
    }

    /// `console-keys`' values: every key version known to the keyring or the store, and their live escrows.
    struct Keys {
        struct Version {
            var version: Int
            var retired: Bool
            var created: String
            var secretKey: String
            var live: Int
        }

        var activeVersion: Int
        var lastCycle: String
        var versions: [Version]
        var chart: Chart?
    }

    func keys(_ viewer: ConsolePages.Viewer) async throws -> Response {
        let view = try await actions.keys()
        let inUse = view.versions.filter { $0.liveEscrows > 0 }.enumerated().map { index, version in
            ("version \(version.version)", version.liveEscrows, index % Chart.paletteSize)
        }
        let keys = Keys(
            activeVersion: Int(view.activeVersion),
            lastCycle: ConsolePages.time(view.lastCycleAt),
            versions: view.versions.map { version in
                Keys.Version(
                    version: Int(version.version),
                    retired: version.retired,
                    created: ConsolePages.time(version.key?.createdAt),
                    secretKey: version.key.map { $0.hasSecretKey ? "yes" : "no" } ?? "not in this keyring",
                    live: version.liveEscrows
                )
            },
            chart: Chart.bars("escrows by key version", inUse)
        )
        return ConsolePages.render("console-keys", title: "Keys", viewer: viewer, keys)
    }

    /// `console-tokens`' values: names and scopes, never a token.
    struct Tokens {
        struct Token {
            var name: String
            var scopes: String
            var created: String
            var revoked: String
        }

        var tokens: [Token]
    }

    func tokenList(_ viewer: ConsolePages.Viewer) async throws -> Response {
        let tokens = try await self.tokens.tokens().sorted { $0.name < $1.name }.map { record in
            Tokens.Token(
                name: record.name,
                scopes: record.scopes.sorted().map(\.rawValue).joined(separator: " "),
                created: ConsolePages.time(record.createdAt),
                revoked: ConsolePages.time(record.revokedAt)
            )
        }
        return ConsolePages.render("console-tokens", title: "Tokens", viewer: viewer, Tokens(tokens: tokens))
    }

    // MARK: Actions

    func requeue(_ id: EscrowID, _ fields: ConsoleForm, _ viewer: ConsolePages.Viewer) async throws -> Response {
        let reason = try OperatorActions.reason(fields.reason)
        let done = try await actions.requeue(id, reason: reason, actor: .console(token: viewer.name))
        return try await escrowPage(
            id: id,
            viewer,
            notice: done ? "Requeued." : "Not requeued: the escrow is not dead."
        )
    }

    func erase(_ id: EscrowID, _ fields: ConsoleForm, _ viewer: ConsolePages.Viewer) async throws -> Response {
        let reason = try OperatorActions.reason(fields.reason)
        let notice: String
        do {
            try await actions.erase(id, reason: reason, actor: .console(token: viewer.name))
            notice = "Erased."
        } catch  where FailureKind(of: error) == .notFound {
            // Nothing held any more: the page still shows the escrow's audit trail, when it has one.
            notice = "Nothing was held under this id."
        }
        return try await escrowPage(id: id, viewer, notice: notice)
    }

    func requeueMatching(_ fields: ConsoleForm, _ viewer: ConsolePages.Viewer) async throws -> Response {
        let reason = try OperatorActions.reason(fields.reason)
        let result = try await actions.requeue(
            matching: try actions.bulkFilter(fields.filter),
            reason: reason,
            actor: .console(token: viewer.name)
        )
        let more = result.more ? " More match: submit again." : ""
        let message = ConsolePages.Message(
            kind: "ok",
            id: "notice",
            text: "Requeued \(result.requeued) dead escrows.\(more)",
            link: "/console/escrows?state=dead",
            linkText: "Dead escrows"
        )
        return ConsolePages.render("console-message", title: "Requeued", viewer: viewer, message)
    }

    /// The overview's delivery form: pauses (`paused` true) or resumes deliveries on every node, with the reason typed.
    func switchDeliveries(paused: Bool, _ fields: ConsoleForm, _ viewer: ConsolePages.Viewer) async throws -> Response {
        let reason = try OperatorActions.reason(fields.reason)
        let actor = AuditActor.console(token: viewer.name)
        let change =
            paused
            ? try await actions.pauseDeliveries(reason: reason, actor: actor)
            : try await actions.resumeDeliveries(reason: reason, actor: actor)
        let state = paused ? "paused" : "resumed"
        let message = ConsolePages.Message(
            kind: change.changed ? "ok" : "muted",
            id: "notice",
            text: change.changed
                ? "Deliveries \(state) on every node." : "Deliveries were already \(state): nothing changed.",
            link: "/console/",
            linkText: "Overview"
        )
        return ConsolePages.render("console-message", title: "Deliveries", viewer: viewer, message)
    }

    func lookup(_ fields: ConsoleForm, _ viewer: ConsolePages.Viewer) async throws -> Response {
        let identifier = fields.userIdentifier?.trimmingCharacters(in: .whitespaces)
        let exists = try await actions.hasEscrow(userIdentifier: try OperatorActions.userIdentifier(identifier))
        let message = ConsolePages.Message(
            kind: exists ? "ok" : "muted",
            id: "lookup-result",
            text: exists ? "Yes: this user has a live escrow." : "No: this user has no live escrow."
        )
        return ConsolePages.render("console-message", title: "Lookup", viewer: viewer, message)
    }
}

// The rows of a page's tables are read by name through `MustacheParent`, not through `Mirror`, which the renderer
// otherwise builds for every value it looks up (a list of 50 escrows rendered in less than half the time).

extension ConsoleRoutes.EscrowList.Row: MustacheParent {
    func child(named name: String) -> Any? {
        switch name {
        case "id": id
        case "state": state
        case "attempts": attempts
        case "created": created
        case "expires": expires
        case "keyVersion": keyVersion
        case "deadCode": deadCode
        case "lastStatus": lastStatus
        default: nil
        }
    }
}

extension ConsoleRoutes.EscrowPage.Event: MustacheParent {
    func child(named name: String) -> Any? {
        switch name {
        case "sequence": sequence
        case "time": time
        case "type": type
        case "detail": detail
        case "httpStatus": httpStatus
        case "actor": actor
        case "reason": reason
        default: nil
        }
    }
}

extension ConsoleRoutes.Tokens.Token: MustacheParent {
    func child(named name: String) -> Any? {
        switch name {
        case "name": self.name
        case "scopes": scopes
        case "created": created
        case "revoked": revoked
        default: nil
        }
    }
}
