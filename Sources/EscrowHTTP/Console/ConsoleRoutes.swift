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
/// the role: `read` a viewer, `operate`/`erase` an operator, `audit` an auditor. Each handler decodes, calls
/// ``OperatorActions`` (as the admin API and the CLI do) and renders a template; actions are audited as
/// `console:<token name>` with the reason typed. Every form a session posts is answered with POST, redirect, GET
/// (``ConsoleSessions/hold(_:_:sessionID:now:)``): nothing typed stays in a body a reload or a restored tab posts again.
/// Sessions and held pages live in the store (``ConsoleSessions``): any node serves any session.
struct ConsoleRoutes: Sendable {
    let escrow: Escrow
    let tokens: any AccessTokenStore
    let overview: AdminOverviewPublisher
    let sessions: ConsoleSessions
    let anonymous: ClientRateLimiter
    /// The worker's delivery settings, for the test delivery; nil on a node without a worker.
    var backend: ReplayWorker.Configuration? = nil

    static let sessionCookie = "__Host-pe_session"
    static let signInCookie = "__Host-pe_signin"

    /// The operator's actions, on this console's escrow and overview.
    var actions: OperatorActions { OperatorActions(escrow: escrow, overviews: overview, backend: backend) }

    /// The console's routes: the stylesheet and the sign-in on `router`; every other page in one group whose
    /// ``ConsoleSession`` finds the viewer, each scope declared on its own group (``ConsoleRole``).
    func register<Context: RequestContext>(on router: some RouterMethods<Context>) {
        router.get(RouterPath(ConsolePages.stylesheetPath)) { _, _ in
            ConsolePages.response(.ok, \.stylesheet, type: "text/css; charset=utf-8")
        }
        router.get("/console/signin") { _, _ in signInPage() }
        router.post("/console/signin") { request, context in try await signIn(request, context) }

        typealias Console = ConsoleRequestContext<Context>
        let console = router.group("/console", context: Console.self).add(middleware: ConsoleSession(routes: self))
        console.get { _, context in try await home(context.signedIn()) }
        console.get("result/:resultId") { _, context in try await heldResult(context) }
        console.post("signout") { request, context in
            _ = try await form(request, context)
            try await sessions.end(id: context.sessionID)
            return ConsolePages.redirect(
                "/console/signin",
                headers: [.setCookie: Self.cookie(Self.sessionCookie, "", maxAge: 0)]
            )
        }
        console.group().add(middleware: ConsoleRole(.read))
            .get("escrows") { request, context in try await list(request, context.signedIn()) }
            .get("escrows/:escrowId") { _, context in
                try await escrowPage(id: try Self.escrowID(context), context.signedIn())
            }
            .get("keys") { _, context in try await keys(context.signedIn()) }
            .get("notifications") { _, context in try await notifications(context.signedIn()) }
            .post("lookup") { request, context in try await lookup(try await form(request, context), context.signedIn())
            }
        // Every token's name and scopes: an operator's view (`operate`), not a viewer's or an auditor's.
        console.group().add(middleware: ConsoleRole(.operate))
            .get("tokens") { _, context in try await tokenList(context.signedIn()) }
            .post("escrows/requeue") { request, context in
                try await requeueMatching(try await form(request, context), context.signedIn())
            }
            .post("escrows/:escrowId/requeue") { request, context in
                try await requeue(try Self.escrowID(context), try await form(request, context), context.signedIn())
            }
            .post("deliveries/pause") { request, context in
                try await switchDeliveries(paused: true, try await form(request, context), context.signedIn())
            }
            .post("deliveries/resume") { request, context in
                try await switchDeliveries(paused: false, try await form(request, context), context.signedIn())
            }
            .post("deliveries/test") { request, context in
                _ = try await form(request, context)
                return try await testDelivery(context.signedIn())
            }
        console.group().add(middleware: ConsoleRole(.erase))
            .post("escrows/:escrowId/erase") { request, context in
                try await erase(try Self.escrowID(context), try await form(request, context), context.signedIn())
            }
        console.group().add(middleware: ConsoleRole(.audit))
            .get("purge-report") { _, _ in
                ConsolePages.response(.ok, html: try await actions.purgeReportFromCheckpoint().html(for: .console))
            }
    }

    static func escrowID(_ context: some RequestContext) throws -> EscrowID {
        try OperatorActions.escrowID(context.parameters.get("escrowId"))
    }

    // MARK: Sessions

    static func cookie(_ name: String, _ value: String, maxAge: Int) -> String {
        "\(name)=\(value); Path=/; Max-Age=\(maxAge); HttpOnly; Secure; SameSite=Strict"
    }

    /// The signed-in viewer, with the session's cookie value; nil when there is no live session or its token was
    /// revoked (the session then ends). The token is read again at every request, on whichever node: a revocation
    /// ends its sessions everywhere at their next request.
    func viewer(_ request: Request) async throws -> (ConsolePages.Viewer, String)? {
        guard let id = request.cookieValue(Self.sessionCookie),
            let session = try await sessions.session(id: id, now: Date())
        else { return nil }
        guard let record = try await tokens.token(hash: session.tokenHash),
            Hashing.constantTimeEqual(record.hash, session.tokenHash), !record.isRevoked
        else {
            try await sessions.end(id: id)
            return nil
        }
        return (ConsolePages.Viewer(name: record.name, scopes: record.scopes, csrf: session.csrf), id)
    }

    /// A signed-in form's fields: a form body, from the same origin, with the session's CSRF token.
    func form(_ request: Request, _ context: ConsoleRequestContext<some RequestContext>) async throws -> ConsoleForm {
        let viewer = try context.signedIn()
        let fields = try await ConsoleForm.read(request)
        guard Self.sameOrigin(request),
            let csrf = fields.csrf, Hashing.constantTimeEqual(Array(csrf.utf8), Array(viewer.csrf.utf8))
        else {
            throw Problem(
                .forbidden,
                code: "csrf_refused",
                detail: "This form's CSRF token is missing or wrong: reload the page and try again."
            )
        }
        return fields
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
        do {
            let resultID = try await sessions.hold(response.status, html, sessionID: sessionID, now: Date())
            return ConsolePages.redirect("/console/result/\(resultID)")
        } catch {
            return Self.failure(error, viewer: nil)
        }
    }

    /// `GET /console/result/<id>`: the held answer to this session's form, once. A reload, another session or a
    /// result past its minute finds nothing held: `410`, with a link back (the form is never posted again by itself).
    func heldResult(_ context: ConsoleRequestContext<some RequestContext>) async throws -> Response {
        let viewer = try context.signedIn()
        guard let resultID = context.parameters.get("resultId"),
            let held = try await sessions.take(resultID, sessionID: context.sessionID, now: Date())
        else {
            return ConsolePages.errorPage(
                .gone,
                "This result was shown once and is not kept: go back and do it again if you need it.",
                viewer: viewer
            )
        }
        return ConsolePages.response(held.status, html: held.html)
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

    /// The error page of `error`, by its ``FailureKind`` (the status the admin API answers too); a problem made here
    /// keeps its own status and detail.
    static func failure(_ error: any Error, viewer: ConsolePages.Viewer?) -> Response {
        let kind = FailureKind(of: error)
        if let problem = error as? Problem {
            return ConsolePages.errorPage(problem.status, problem.detail + field(problem.field), viewer: viewer)
        }
        let message =
            switch kind {
            case .badInput, .tooLarge:
                (error as? OperatorActions.InputError).map { $0.message + field($0.field) } ?? "The input was refused."
            case .unauthorized, .forbidden: "Your role may not do this."
            case .notFound: "No escrow with this id."
            case .conflict: "Someone or something else changed this meanwhile: reload the page and try again."
            // A stored row someone changed: the store answers, the row cannot be read. Never "try again".
            case .damaged:
                "This escrow's stored row is malformed or failed its integrity check (someone changed it): it cannot "
                    + "be shown or used. It is dead (ciphertext_invalid) once a worker or a read of its user meets it; "
                    + "erase it by its user, and retention purges it in any case."
            case .unavailable: "The store did not answer; try again."
            case .internal: "Something failed here; try again."
            }
        return ConsolePages.errorPage(HTTPResponse.Status(code: kind.httpStatus), message, viewer: viewer)
    }

    private static func field(_ name: String?) -> String { name.map { " (\($0))" } ?? "" }

    // MARK: Sign-in

    /// `console-signin`'s values: the form's CSRF token (also in the sign-in cookie) and why the last try failed.
    struct SignInPage {
        var csrf: String
        var message: String?
    }

    func signInPage(message: String? = nil, status: HTTPResponse.Status = .ok) -> Response {
        let csrf = Base64URL.encode(Hashing.randomBytes(count: 24))
        return ConsolePages.render(
            "console-signin",
            title: "Sign in",
            viewer: nil,
            SignInPage(csrf: csrf, message: message),
            status: status,
            headers: [.setCookie: Self.cookie(Self.signInCookie, csrf, maxAge: 900)]
        )
    }

    func signIn(_ request: Request, _ context: some RequestContext) async throws -> Response {
        do {
            try anonymous.admit("console-signin", request, context)
        } catch {
            return Self.failure(error, viewer: nil)
        }
        let fields: ConsoleForm
        do { fields = try await ConsoleForm.read(request) } catch { return Self.failure(error, viewer: nil) }
        guard Self.sameOrigin(request), let expected = request.cookieValue(Self.signInCookie),
            let csrf = fields.csrf, Hashing.constantTimeEqual(Array(csrf.utf8), Array(expected.utf8))
        else {
            return signInPage(
                message: "The sign-in form expired or was not this site's: try again.",
                status: .forbidden
            )
        }
        let token = (fields.token ?? "").trimmingCharacters(in: .whitespaces)
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
        let session = try await sessions.create(tokenHash: hash, now: Date())
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

}
