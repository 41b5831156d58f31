import EscrowCore
import EscrowCrypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import ProfileEscrow

/// `/console/…`: the operator console, server-rendered. Signing in takes a bearer token once (a form POST); then a
/// server-side session in a `__Host-` cookie (`HttpOnly; Secure; SameSite=Strict`), its token checked again on every
/// request (revoked → signed out), and a CSRF token in every form, checked on every POST. The token's scopes are
/// the role: `read` a viewer, `operate`/`erase` an operator, `audit` an auditor. Actions are audited as
/// `console:<token name>` with the reason typed. Every form a session posts is answered with POST, redirect, GET
/// (``ConsoleSessions/hold(_:_:sessionID:now:)``): nothing typed stays in a body a reload or a restored tab posts again.
struct ConsoleRoutes: Sendable {
    let escrow: Escrow
    let tokens: any AccessTokenStore
    let overview: AdminOverviewPublisher
    let sessions: ConsoleSessions
    let anonymous: ClientRateLimiter

    static let sessionCookie = "__Host-pe_session"
    static let signInCookie = "__Host-pe_signin"
    static let formLimit = 8 * 1024

    func register<Context: RequestContext>(on router: some RouterMethods<Context>) {
        router.get("/console/static/console.css") { _, _ in
            var headers = ConsolePages.securityHeaders()
            headers[.contentType] = "text/css; charset=utf-8"
            return Response(
                status: .ok,
                headers: headers,
                body: .init(byteBuffer: ByteBuffer(string: ConsolePages.stylesheet))
            )
        }
        router.get("/console/signin") { _, _ in signInPage() }
        router.post("/console/signin") { request, context in try await signIn(request, context) }
        router.post("/console/signout") { request, _ in
            await form(request, scope: nil) { viewer, _, sessionID in
                sessions.end(id: sessionID)
                return ConsolePages.redirect(
                    "/console/signin",
                    headers: [.setCookie: Self.cookie(Self.sessionCookie, "", maxAge: 0)]
                )
            }
        }
        router.get("/console") { request, _ in await page(request, scope: nil) { try await home($0) } }
        router.get("/console/escrows") { request, _ in await page(request, scope: .read) { try await list(request, $0) }
        }
        router.post("/console/escrows/requeue") { request, _ in
            await form(request, scope: .operate) { viewer, fields, _ in try await requeueMatching(fields, viewer) }
        }
        router.get("/console/escrows/:escrowId") { request, context in
            await page(request, scope: .read) { try await escrowPage(context, $0) }
        }
        router.post("/console/escrows/:escrowId/requeue") { request, context in
            await form(request, scope: .operate) { viewer, fields, _ in try await requeue(context, fields, viewer) }
        }
        router.post("/console/escrows/:escrowId/erase") { request, context in
            await form(request, scope: .erase) { viewer, fields, _ in try await erase(context, fields, viewer) }
        }
        router.post("/console/lookup") { request, _ in
            await form(request, scope: .read) { viewer, fields, _ in try await lookup(fields, viewer) }
        }
        router.get("/console/keys") { request, _ in await page(request, scope: .read) { try await keys($0) } }
        // Every token's name and scopes: an operator's view (`operate`), not a viewer's or an auditor's.
        router.get("/console/tokens") { request, _ in
            await page(request, scope: .operate) { try await tokenList($0) }
        }
        router.get("/console/result/:resultId") { request, context in await heldResult(request, context) }
        router.get("/console/purge-report") { request, _ in
            await page(request, scope: .audit) { _ in
                let html = try await PurgeReport.build(
                    store: escrow.store,
                    until: escrow.configuration.clock.now(),
                    verify: true,
                    retentionSeconds: escrow.configuration.retention,
                    now: escrow.configuration.clock.now()
                ).html()
                    .replacingOccurrences(
                        of: "<body>",
                        with: "<body><p><a href=\"/console/\">&#8592; Back to the console</a></p>"
                    )
                var headers = ConsolePages.securityHeaders(styleHashes: ConsolePages.styleHashes(of: html))
                headers[.contentType] = "text/html; charset=utf-8"
                return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
            }
        }
    }

    // MARK: Sessions

    static func cookie(_ name: String, _ value: String, maxAge: Int) -> String {
        "\(name)=\(value); Path=/; Max-Age=\(maxAge); HttpOnly; Secure; SameSite=Strict"
    }

    /// The signed-in viewer, with the session's cookie value; nil when there is no live session or its token was
    /// revoked (the session then ends).
    func viewer(_ request: Request) async throws -> (ConsolePages.Viewer, String)? {
        guard let id = request.cookieValue(Self.sessionCookie),
            let session = sessions.session(id: id, now: Date())
        else { return nil }
        guard let record = try await tokens.token(hash: session.tokenHash),
            Hashing.constantTimeEqual(record.hash, session.tokenHash), !record.isRevoked
        else {
            sessions.end(id: id)
            return nil
        }
        return (ConsolePages.Viewer(name: record.name, scopes: record.scopes, csrf: session.csrf), id)
    }

    /// A GET page: signed in (else to the sign-in page) with `scope` (else a 403 page).
    func page(
        _ request: Request,
        scope: AccessTokenScope?,
        _ body: (ConsolePages.Viewer) async throws -> Response
    ) async -> Response {
        let signedIn: (ConsolePages.Viewer, String)?
        do { signedIn = try await viewer(request) } catch { return Self.failure(error, viewer: nil) }
        guard let (viewer, _) = signedIn else {
            // Just signed in, yet no session cookie came back: the browser refused a `Secure` cookie over plain HTTP.
            if request.uri.queryParameters["signedin"] != nil {
                return signInPage(
                    message:
                        "Your browser did not keep the session cookie: open the console over HTTPS (or on localhost).",
                    status: .forbidden
                )
            }
            return ConsolePages.redirect("/console/signin")
        }
        if let scope, !viewer.may(scope) {
            return ConsolePages.errorPage(
                .forbidden,
                "Your role (\(viewer.role)) may not do this: it needs the \(scope.rawValue) scope.",
                viewer: viewer
            )
        }
        do { return try await body(viewer) } catch { return Self.failure(error, viewer: viewer) }
    }

    /// A form POST: a form body, the same origin, a live session with `scope`, and the session's CSRF token.
    func form(
        _ request: Request,
        scope: AccessTokenScope?,
        _ body: (ConsolePages.Viewer, SignInForm, String) async throws -> Response
    ) async -> Response {
        let signedIn: (ConsolePages.Viewer, String)?
        do { signedIn = try await viewer(request) } catch { return Self.failure(error, viewer: nil) }
        guard let (viewer, id) = signedIn else { return ConsolePages.redirect("/console/signin") }
        return await redirectHeld(await answer(request, scope: scope, viewer, id, body), sessionID: id)
    }

    /// A signed-in form's own answer, before ``redirectHeld(_:sessionID:)`` holds it.
    private func answer(
        _ request: Request,
        scope: AccessTokenScope?,
        _ viewer: ConsolePages.Viewer,
        _ id: String,
        _ body: (ConsolePages.Viewer, SignInForm, String) async throws -> Response
    ) async -> Response {
        let fields: SignInForm
        do { fields = try await Self.readForm(request) } catch { return Self.failure(error, viewer: viewer) }
        guard Self.sameOrigin(request),
            let csrf = fields["csrf"], Hashing.constantTimeEqual(Array(csrf.utf8), Array(viewer.csrf.utf8))
        else {
            return ConsolePages.errorPage(
                .forbidden,
                "This form's CSRF token is missing or wrong: reload the page and try again.",
                viewer: viewer
            )
        }
        if let scope, !viewer.may(scope) {
            return ConsolePages.errorPage(
                .forbidden,
                "Your role (\(viewer.role)) may not do this: it needs the \(scope.rawValue) scope.",
                viewer: viewer
            )
        }
        do { return try await body(viewer, fields, id) } catch { return Self.failure(error, viewer: viewer) }
    }

    /// POST, redirect, GET: a page answering a form is held in the session for one GET of `/console/result/<id>`, and
    /// the browser is sent there with `303`; a redirect (sign-out) passes as it is.
    func redirectHeld(_ response: Response, sessionID: String) async -> Response {
        guard !(300..<400).contains(response.status.code) else { return response }
        let collector = BodyCollector()
        do { try await response.body.write(collector) } catch {
            return ConsolePages.errorPage(.internalServerError, "The page could not be made; try again.", viewer: nil)
        }
        let html = collector.body.withLockedValue { String(buffer: $0) }
        guard let resultID = sessions.hold(response.status, html, sessionID: sessionID, now: Date()) else {
            return ConsolePages.redirect("/console/signin")
        }
        return ConsolePages.redirect("/console/result/\(resultID)")
    }

    /// `GET /console/result/<id>`: the held answer to this session's form, once. A reload, another session or a
    /// result past its minute finds nothing held: `410`, with a link back (the form is never posted again by itself).
    func heldResult(_ request: Request, _ context: some RequestContext) async -> Response {
        let signedIn: (ConsolePages.Viewer, String)?
        do { signedIn = try await viewer(request) } catch { return Self.failure(error, viewer: nil) }
        guard let (viewer, sessionID) = signedIn else { return ConsolePages.redirect("/console/signin") }
        guard let resultID = context.parameters.get("resultId"),
            let held = sessions.take(resultID, sessionID: sessionID, now: Date())
        else {
            return ConsolePages.errorPage(
                .gone,
                "This result was shown once and is not kept: go back and do it again if you need it.",
                viewer: viewer
            )
        }
        return ConsolePages.response(held.status, held.html)
    }

    /// Collects a page's body (one buffer) to hold it.
    private struct BodyCollector: ResponseBodyWriter {
        let body = NIOLockedValueBox(ByteBuffer())

        func write(_ buffer: ByteBuffer) async throws {
            _ = body.withLockedValue { $0.writeImmutableBuffer(buffer) }
        }

        func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }

    /// A POST whose `Origin` (when the browser sends one) is not this host's is refused with the CSRF check.
    static func sameOrigin(_ request: Request) -> Bool {
        guard let origin = request.headers[.origin] else { return true }
        guard let host = request.head.authority else { return false }
        return origin == "https://\(host)" || origin == "http://\(host)"
    }

    static func readForm(_ request: Request) async throws -> SignInForm {
        let type = request.headers[.contentType]?.split(separator: ";").first.map { $0.trimmingSpaces().lowercased() }
        guard type == "application/x-www-form-urlencoded" else {
            throw Problem(.unsupportedMediaType, code: "unsupported_media_type", detail: "a form was expected")
        }
        let body = try await RequestBodyReader.read(request, limit: formLimit)
        guard let form = SignInForm(body) else {
            throw Problem(.badRequest, code: "invalid_form", detail: "the form is malformed")
        }
        return form
    }

    static func failure(_ error: any Error, viewer: ConsolePages.Viewer?) -> Response {
        if let problem = error as? Problem {
            let field = problem.field.map { " (\($0))" } ?? ""
            return ConsolePages.errorPage(problem.status, problem.detail + field, viewer: viewer)
        }
        if let error = error as? EscrowError, error.code == .notFound {
            return ConsolePages.errorPage(.notFound, "No escrow with this id.", viewer: viewer)
        }
        // A stored row someone changed: the store answers, the row cannot be read. Never "try again".
        if (error as? EscrowStoreError)?.code == .malformedRow || (error as? EscrowError)?.code == .ciphertextInvalid {
            return ConsolePages.errorPage(
                .conflict,
                "This escrow's stored row is malformed or failed its integrity check (someone changed it): it cannot "
                    + "be shown or used. It is dead (ciphertext_invalid) once a worker or a read of its user meets it; "
                    + "erase it by its user, and retention purges it in any case.",
                viewer: viewer
            )
        }
        return ConsolePages.errorPage(.internalServerError, "The store did not answer; try again.", viewer: viewer)
    }

    // MARK: Sign-in

    func signInPage(message: String? = nil, status: HTTPResponse.Status = .ok) -> Response {
        let csrf = Base64URL.encode(Hashing.randomBytes(count: 24))
        return ConsolePages.response(
            status,
            ConsolePages.signIn(csrf: csrf, message: message),
            headers: [.setCookie: Self.cookie(Self.signInCookie, csrf, maxAge: 900)]
        )
    }

    func signIn(_ request: Request, _ context: some RequestContext) async throws -> Response {
        do {
            try anonymous.admit("console-signin", request, context)
        } catch {
            return Self.failure(error, viewer: nil)
        }
        let fields: SignInForm
        do { fields = try await Self.readForm(request) } catch { return Self.failure(error, viewer: nil) }
        guard Self.sameOrigin(request), let expected = request.cookieValue(Self.signInCookie),
            let csrf = fields["csrf"], Hashing.constantTimeEqual(Array(csrf.utf8), Array(expected.utf8))
        else {
            return signInPage(
                message: "The sign-in form expired or was not this site's: try again.",
                status: .forbidden
            )
        }
        let token = (fields["token"] ?? "").trimmingCharacters(in: .whitespaces)
        guard !token.isEmpty, token.utf8.count <= AccessTokens.maximumLength else {
            return signInPage(message: "That token is not valid.", status: .unauthorized)
        }
        let hash = AccessTokens.hash(token)
        guard let record = try await tokens.token(hash: hash), Hashing.constantTimeEqual(record.hash, hash),
            !record.isRevoked
        else {
            context.logger.info("console sign-in refused: unknown or revoked token")
            return signInPage(message: "That token is not valid.", status: .unauthorized)
        }
        guard !record.scopes.isDisjoint(with: [.read, .operate, .erase, .audit]) else {
            return signInPage(
                message: "This token has no console role (read, operate, erase or audit).",
                status: .forbidden
            )
        }
        let session = sessions.create(tokenHash: hash, now: Date())
        context.logger.info("console sign-in", metadata: ["token": "\(record.name)"])
        var headers = HTTPFields()
        headers.append(
            HTTPField(
                name: .setCookie,
                value: Self.cookie(Self.sessionCookie, session.id, maxAge: Int(sessions.lifetime))
            )
        )
        headers.append(HTTPField(name: .setCookie, value: Self.cookie(Self.signInCookie, "", maxAge: 0)))
        return ConsolePages.redirect("/console/?signedin", headers: headers)
    }

    // MARK: Pages

    func home(_ viewer: ConsolePages.Viewer) async throws -> Response {
        guard viewer.may(.read) else {
            var body = "<p>Signed in as <strong>\(ConsolePages.escape(viewer.name))</strong> (\(viewer.role)).</p>"
            if viewer.may(.audit) { body += "<p><a href=\"/console/purge-report\">Open the purge report</a></p>" }
            return ConsolePages.response(.ok, ConsolePages.page(title: "Console", viewer: viewer, body: body))
        }
        let overview = try await self.overview.latest()
        func card(_ label: String, _ value: String, id: String) -> String {
            "<div class=\"card\" id=\"\(id)\"><div class=\"label\">\(ConsolePages.escape(label))</div>"
                + "<div class=\"value\">\(ConsolePages.escape(value))</div></div>"
        }
        let live = overview.live.values.reduce(0, +)
        var body =
            "<p class=\"muted\">As of \(ConsolePages.time(overview.generatedAt)) (refreshed every few seconds).</p>"
        body += "<div class=\"cards\">"
        body += card("Live escrows", "\(live)", id: "live")
        body += card("Oldest pending", ConsolePages.age(overview.oldestPendingAgeSeconds), id: "oldest-pending")
        body += card("Dead", "\(overview.live[.dead] ?? 0)", id: "dead")
        body += card("Captures, 24 h", "\(overview.captures)", id: "captures")
        body += "</div><div class=\"grid\">"
        let states = EscrowState.live.enumerated().map { index, state in
            (state.rawValue, overview.live[state] ?? 0, ConsolePages.palette[index])
        }
        body += "<section><h2>Live by state</h2>\(ConsolePages.barChart("live escrows by state", states))</section>"
        body += "<section><h2>Dead by code</h2>"
        body += ConsolePages.barChart("dead escrows by code", ConsolePages.colored(overview.deadByCode)) + "</section>"
        body += "<section><h2>Deliveries, 24 h</h2>"
        body += ConsolePages.barChart("deliveries by outcome", ConsolePages.colored(overview.deliveries)) + "</section>"
        body += "<section><h2>Purges, 24 h</h2>"
        body += ConsolePages.barChart("purges by reason", ConsolePages.colored(overview.purges)) + "</section>"
        body += "</div>"
        let times = overview.history.map(\.at)
        body += "<section><h2>Backlog over time</h2><p class=\"legend\"><span class=\"pending\">pending</span> "
        body += "<span class=\"dead\">dead</span> (a point every 5 minutes since this node started, up to 24 h)</p>"
        body += ConsolePages.lineChart(
            "pending and dead escrows over time",
            times: times,
            series: [
                ("pending", overview.history.map(\.pending), ConsolePages.palette[0]),
                ("dead", overview.history.map(\.dead), ConsolePages.palette[3]),
            ]
        )
        body += "</section>"
        body += """
            <h2>Does a user have an escrow?</h2>
            <form method="post" action="/console/lookup" class="action" autocomplete="off">\(ConsolePages.csrfField(viewer))
            <label>User identifier <input type="text" name="userIdentifier" required maxlength="255"></label>
            <button type="submit" id="lookup">Look up</button>
            <span class="muted">The answer is yes or no; the identifier is neither shown nor kept.</span></form>
            """
        return ConsolePages.response(.ok, ConsolePages.page(title: "Overview", viewer: viewer, body: body))
    }

    func list(_ request: Request, _ viewer: ConsolePages.Viewer) async throws -> Response {
        let fields = request.uri.queryParameters.map { (String($0.key), String($0.value)) }
        let input = try AdminFilterInput.parse(fields, now: escrow.configuration.clock.now(), emptyIsAbsent: true)
        let page = try await escrow.list(input.filter, after: input.cursor, limit: input.limit)
        let given = Dictionary(input.given.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
        func field(_ name: String, _ label: String, size: Int = 10) -> String {
            "<label>\(label)<input type=\"text\" name=\"\(name)\" size=\"\(size)\" "
                + "value=\"\(ConsolePages.escape(given[name] ?? ""))\"></label>"
        }
        var states = "<option value=\"\">any</option>"
        for state in EscrowState.live {
            let selected = input.filter.state == state ? " selected" : ""
            states += "<option value=\"\(state.rawValue)\"\(selected)>\(state.rawValue)</option>"
        }
        var body = """
            <form method="get" action="/console/escrows" class="filters">
            <label>State<select name="state" id="state">\(states)</select></label>
            \(field("minAgeSeconds", "Min age (s)"))\(field("keyVersion", "Key version", size: 5))
            \(field("deadCode", "Dead code", size: 18))\(field("minAttempts", "Min attempts", size: 5))
            <label>Per page<input type="text" name="limit" size="4" value="\(input.limit)"></label>
            <button type="submit" id="filter">Filter</button></form>
            """
        body += "<table id=\"escrows\"><thead><tr><th>Escrow</th><th>State</th><th class=\"n\">Attempts</th>"
        body +=
            "<th>Created</th><th>Expires</th><th class=\"n\">Key</th><th>Dead code</th><th class=\"n\">Last status</th>"
        body += "</tr></thead><tbody>"
        for status in page.escrows {
            body +=
                "<tr><td class=\"id\"><a href=\"/console/escrows/\(status.escrowID.hex)\">\(status.escrowID.hex)</a></td>"
            body += "<td>\(status.state.rawValue)</td><td class=\"n\">\(status.attempts)</td>"
            body += "<td>\(ConsolePages.time(status.createdAt))</td><td>\(ConsolePages.time(status.expiresAt))</td>"
            body += "<td class=\"n\">\(status.keyVersion)</td>"
            body += "<td>\(ConsolePages.escape(status.deadCode?.rawValue ?? ""))</td>"
            body += "<td class=\"n\">\(status.lastStatus.map(String.init) ?? "")</td></tr>"
        }
        if page.escrows.isEmpty { body += "<tr><td colspan=\"8\" class=\"muted\">No escrow matches.</td></tr>" }
        body += "</tbody></table>"
        let filterQuery = input.given.map { "\($0.name)=\(ConsolePages.query($0.value))" }
        if let next = page.next {
            let query = (filterQuery + ["limit=\(input.limit)", "cursor=\(AdminFilterInput.encodeCursor(next))"])
                .joined(separator: "&amp;")
            body += "<p class=\"pager\"><a id=\"next\" href=\"/console/escrows?\(query)\">Next page &#8594;</a></p>"
        } else {
            body += "<p class=\"pager muted\">Last page.</p>"
        }
        if input.cursor != nil {
            let first = filterQuery.joined(separator: "&amp;")
            body += "<p><a href=\"/console/escrows?\(first)\">First page</a></p>"
        }
        if viewer.may(.operate) {
            var hidden = ""
            for (name, value) in input.given {
                hidden += "<input type=\"hidden\" name=\"\(name)\" value=\"\(ConsolePages.escape(value))\">"
            }
            body += """
                <h2>Requeue every dead escrow that matches</h2>
                <form method="post" action="/console/escrows/requeue" class="action">\(ConsolePages.csrfField(viewer))\(hidden)
                <label>Reason <input type="text" name="reason" id="bulk-reason" required maxlength="200" size="50"></label>
                <button type="submit" id="bulk-requeue">Requeue matching dead escrows</button>
                <span class="muted">Up to 10,000 at a time; only dead escrows are requeued.</span></form>
                """
        }
        return ConsolePages.response(.ok, ConsolePages.page(title: "Escrows", viewer: viewer, body: body))
    }

    func escrowPage(
        _ context: some RequestContext,
        _ viewer: ConsolePages.Viewer,
        notice: String? = nil
    ) async throws
        -> Response
    {
        let id = try AdminRoutes.escrowID(context)
        return try await escrowPage(id: id, viewer, notice: notice)
    }

    func escrowPage(id: EscrowID, _ viewer: ConsolePages.Viewer, notice: String? = nil) async throws -> Response {
        let history = try await escrow.inspect(id: id, limit: 1_000)
        var body = notice.map { "<p class=\"ok\" id=\"notice\">\(ConsolePages.escape($0))</p>" } ?? ""
        body += "<p class=\"id\">\(id.hex)</p>"
        if let status = history.status {
            body += "<table id=\"metadata\"><tbody>"
            let rows: [(String, String)] = [
                ("State", status.state.rawValue), ("Attempts", "\(status.attempts)"),
                ("Next attempt", ConsolePages.time(status.nextAttemptAt)),
                ("Created", ConsolePages.time(status.createdAt)), ("Expires", ConsolePages.time(status.expiresAt)),
                ("Key version", "\(status.keyVersion)"), ("Dead code", status.deadCode?.rawValue ?? "-"),
                ("Last status", status.lastStatus.map(String.init) ?? "-"),
            ]
            for (name, value) in rows {
                body += "<tr><th>\(name)</th><td>\(ConsolePages.escape(value))</td></tr>"
            }
            body += "</tbody></table>"
            if viewer.may(.operate), status.state == .dead {
                body += """
                    <form method="post" action="/console/escrows/\(id.hex)/requeue" class="action">\(ConsolePages.csrfField(viewer))
                    <label>Reason <input type="text" name="reason" id="requeue-reason" required maxlength="200" size="50"></label>
                    <button type="submit" id="requeue">Requeue</button></form>
                    """
            }
            if viewer.may(.erase) {
                body += """
                    <form method="post" action="/console/escrows/\(id.hex)/erase" class="action">\(ConsolePages.csrfField(viewer))
                    <label>Reason <input type="text" name="reason" id="erase-reason" required maxlength="200" size="50"></label>
                    <button type="submit" class="danger" id="erase">Erase now</button>
                    <span class="muted">Purges the escrow as erased; it cannot be undone.</span></form>
                    """
            }
        } else {
            body += "<p class=\"muted\" id=\"purged\">Purged: only its audit trail remains.</p>"
        }
        body += "<h2>History</h2><table id=\"history\"><thead><tr><th class=\"n\">#</th><th>Time</th><th>Event</th>"
        body += "<th>Detail</th><th class=\"n\">HTTP</th><th>Actor</th><th>Reason</th></tr></thead><tbody>"
        for event in history.events {
            body += "<tr><td class=\"n\">\(event.sequence)</td><td>\(ConsolePages.time(event.at))</td>"
            body += "<td>\(ConsolePages.escape(event.type.rawValue))</td>"
            body += "<td>\(ConsolePages.escape(event.detail ?? ""))</td>"
            body += "<td class=\"n\">\(event.httpStatus.map(String.init) ?? "")</td>"
            body += "<td>\(ConsolePages.escape(event.actor.rawValue))</td>"
            body += "<td>\(ConsolePages.escape(event.reason ?? ""))</td></tr>"
        }
        body += "</tbody></table>"
        return ConsolePages.response(.ok, ConsolePages.page(title: "Escrow", viewer: viewer, body: body))
    }

    func keys(_ viewer: ConsolePages.Viewer) async throws -> Response {
        let overview = try await self.overview.latest()
        let keyring = escrow.keyring
        var body = "<p>Active version <strong id=\"active-version\">\(keyring.activeVersion)</strong>; last key cycle "
        body +=
            "(rotation, rewrap or retirement): <strong id=\"last-cycle\">\(ConsolePages.time(overview.lastKeyCycleAt))</strong>.</p>"
        body += "<table id=\"keys\"><thead><tr><th class=\"n\">Version</th><th>Created</th><th>Secret key here</th>"
        body += "<th class=\"n\">Live escrows</th></tr></thead><tbody>"
        var versions = Set(keyring.keys.map(\.version)).union(overview.keyVersionsInUse.keys)
        versions.formUnion(overview.retiredKeyVersions)
        for version in versions.sorted() {
            let info = keyring.keys.first { $0.version == version }
            let retired = overview.retiredKeyVersions.contains(version) ? " (retired)" : ""
            body += "<tr><td class=\"n\">\(version)\(retired)</td><td>\(ConsolePages.time(info?.createdAt))</td>"
            body += "<td>\(info.map { $0.hasSecretKey ? "yes" : "no" } ?? "not in this keyring")</td>"
            body += "<td class=\"n\">\(overview.keyVersionsInUse[version] ?? 0)</td></tr>"
        }
        body += "</tbody></table>"
        let chart = overview.keyVersionsInUse.sorted { $0.key < $1.key }.enumerated().map { index, entry in
            ("version \(entry.key)", entry.value, ConsolePages.palette[index % ConsolePages.palette.count])
        }
        body += "<h2>Live escrows by key version</h2>" + ConsolePages.barChart("escrows by key version", chart)
        return ConsolePages.response(.ok, ConsolePages.page(title: "Keys", viewer: viewer, body: body))
    }

    func tokenList(_ viewer: ConsolePages.Viewer) async throws -> Response {
        var body = "<p>Names and scopes only: a token is shown once, when it is made, and never stored.</p>"
        body += "<table id=\"tokens\"><thead><tr><th>Name</th><th>Scopes</th><th>Created</th><th>Revoked</th></tr>"
        body += "</thead><tbody>"
        for record in try await tokens.tokens().sorted(by: { $0.name < $1.name }) {
            body += "<tr><td>\(ConsolePages.escape(record.name))</td>"
            body += "<td>\(ConsolePages.escape(record.scopes.sorted().map(\.rawValue).joined(separator: " ")))</td>"
            body +=
                "<td>\(ConsolePages.time(record.createdAt))</td><td>\(ConsolePages.time(record.revokedAt))</td></tr>"
        }
        body += "</tbody></table>"
        return ConsolePages.response(.ok, ConsolePages.page(title: "Tokens", viewer: viewer, body: body))
    }

    // MARK: Actions

    static func reason(_ fields: SignInForm) throws -> OperatorReason {
        guard let reason = fields["reason"].flatMap(OperatorReason.init) else {
            throw AdminFilterInput.invalid(field: "reason", "A reason is required: " + OperatorReason.rule + ".")
        }
        return reason
    }

    func requeue(
        _ context: some RequestContext,
        _ fields: SignInForm,
        _ viewer: ConsolePages.Viewer
    ) async throws
        -> Response
    {
        let id = try AdminRoutes.escrowID(context)
        let reason = try Self.reason(fields)
        let done = try await escrow.requeue(id: id, actor: .console(token: viewer.name), reason: reason)
        _ = try? await overview.refresh()
        return try await escrowPage(
            id: id,
            viewer,
            notice: done ? "Requeued." : "Not requeued: the escrow is not dead."
        )
    }

    func erase(
        _ context: some RequestContext,
        _ fields: SignInForm,
        _ viewer: ConsolePages.Viewer
    ) async throws
        -> Response
    {
        let id = try AdminRoutes.escrowID(context)
        let reason = try Self.reason(fields)
        let done = try await escrow.erase(id: id, reason: reason, actor: .console(token: viewer.name))
        _ = try? await overview.refresh()
        return try await escrowPage(id: id, viewer, notice: done ? "Erased." : "Nothing was held under this id.")
    }

    func requeueMatching(_ fields: SignInForm, _ viewer: ConsolePages.Viewer) async throws -> Response {
        let reason = try Self.reason(fields)
        let filterFields = fields.fields.filter { AdminFilterInput.filterNames.contains($0.name) }
            .map { ($0.name, $0.value) }
        let input = try AdminFilterInput.parse(
            filterFields,
            now: escrow.configuration.clock.now(),
            allowed: Set(AdminFilterInput.filterNames)
        )
        if let state = input.filter.state, state != .dead {
            throw AdminFilterInput.invalid(field: "state", "Only dead escrows are requeued: filter on state dead.")
        }
        let result = try await escrow.requeue(
            matching: input.filter,
            reason: reason,
            actor: .console(token: viewer.name)
        )
        _ = try? await overview.refresh()
        let more = result.more ? " More match: submit again." : ""
        let body =
            "<p class=\"ok\" id=\"notice\">Requeued \(result.requeued) dead escrows.\(more)</p>"
            + "<p><a href=\"/console/escrows?state=dead\">Dead escrows</a></p>"
        return ConsolePages.response(.ok, ConsolePages.page(title: "Requeued", viewer: viewer, body: body))
    }

    func lookup(_ fields: SignInForm, _ viewer: ConsolePages.Viewer) async throws -> Response {
        guard let identifier = fields["userIdentifier"]?.trimmingCharacters(in: .whitespaces),
            UserIdentifier.isValid(identifier)
        else {
            throw Problem(
                .badRequest,
                code: "invalid_user_identifier",
                detail: "A user identifier is 1-255 characters of [0-9A-Za-z._-].",
                field: "userIdentifier"
            )
        }
        let exists = try await escrow.hasEscrow(userIdentifier: identifier)
        let body =
            "<p id=\"lookup-result\" class=\"\(exists ? "ok" : "muted")\">"
            + (exists ? "Yes: this user has a live escrow." : "No: this user has no live escrow.")
            + "</p><p><a href=\"/console/\">Back</a></p>"
        return ConsolePages.response(.ok, ConsolePages.page(title: "Lookup", viewer: viewer, body: body))
    }
}
