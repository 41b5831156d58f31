import EscrowCore
import Hummingbird

/// Declared on a route group: its routes answer only a caller whose token has `scope` (`403` otherwise, `401` when no
/// ``BearerAuthentication`` of an enclosing group found a caller).
///
/// ```swift
/// let admin = router.group("admin").add(middleware: BearerAuthentication(auth))
/// admin.group().add(middleware: RequireScope(.read)).get("overview") { … }
/// ```
struct RequireScope<Context: CallerRequestContext>: RouterMiddleware {
    let scope: AccessTokenScope

    init(_ scope: AccessTokenScope) { self.scope = scope }

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard try context.requireCaller().scopes.contains(scope) else { throw Problem.forbidden(scope.rawValue) }
        return try await next(request, context)
    }
}
