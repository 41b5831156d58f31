import EscrowCore
import Hummingbird

/// The console's request context: the signed-in viewer and the session's cookie value, filled by ``ConsoleSession``
/// for every route of the console's group (as hummingbird-auth's `AuthRequestContext` carries its identity). A
/// handler reads the viewer; it never looks a session up itself.
struct ConsoleRequestContext<ParentContext: RequestContext>: ChildRequestContext {
    var coreContext: CoreRequestContextStorage
    /// Nil only before ``ConsoleSession`` ran, which lets no request without a viewer through.
    var viewer: ConsolePages.Viewer?
    var sessionID = ""

    init(context: ParentContext) { coreContext = context.coreContext }

    /// The viewer this request is served to.
    func signedIn() throws -> ConsolePages.Viewer {
        guard let viewer else { throw Problem(.unauthorized, code: "unauthorized", detail: "Sign in first.") }
        return viewer
    }
}

/// On the console's group: the viewer of the session cookie, its token checked again (revoked → signed out), put in
/// the context; without one, the sign-in page. Each route's error is its error page (``ConsoleRoutes/failure(_:viewer:)``);
/// a form's answer (a POST) is held in the session for one GET: POST, redirect, GET
/// (``ConsoleRoutes/redirectHeld(_:sessionID:)``).
struct ConsoleSession<ParentContext: RequestContext>: RouterMiddleware {
    typealias Context = ConsoleRequestContext<ParentContext>
    let routes: ConsoleRoutes

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let signedIn: (ConsolePages.Viewer, String)?
        do { signedIn = try await routes.viewer(request) } catch { return ConsoleRoutes.failure(error, viewer: nil) }
        guard let (viewer, sessionID) = signedIn else {
            // Just signed in, yet no session cookie came back: the browser refused a `Secure` cookie over plain HTTP.
            if request.method == .get, request.uri.queryParameters["signedin"] != nil {
                return routes.signInPage(
                    message:
                        "Your browser did not keep the session cookie: open the console over HTTPS (or on localhost).",
                    status: .forbidden
                )
            }
            return ConsolePages.redirect("/console/signin")
        }
        var context = context
        context.viewer = viewer
        context.sessionID = sessionID
        let response: Response
        do { response = try await next(request, context) } catch {
            response = ConsoleRoutes.failure(error, viewer: viewer)
        }
        guard request.method == .post else { return response }
        return await routes.redirectHeld(response, sessionID: sessionID)
    }
}

/// Declared on a group of the console's routes: only a viewer whose token has `scope` gets through; any other gets the
/// `403` page naming the scope.
struct ConsoleRole<ParentContext: RequestContext>: RouterMiddleware {
    typealias Context = ConsoleRequestContext<ParentContext>
    let scope: AccessTokenScope

    init(_ scope: AccessTokenScope) { self.scope = scope }

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let viewer = try context.signedIn()
        guard viewer.may(scope) else {
            return ConsolePages.errorPage(
                .forbidden,
                "Your role (\(viewer.role)) may not do this: it needs the \(scope.rawValue) scope.",
                viewer: viewer
            )
        }
        return try await next(request, context)
    }
}
