import EscrowCore
import EscrowCrypto
import Hummingbird

/// `Authorization: Bearer <token>`: 401 when missing, unknown or revoked; 429 past the token's rate limit. The
/// token's name and scopes are the ``Caller``; ``RequireScope`` checks its scope (403).
struct BearerAuthenticator: Sendable {
    let store: any AccessTokenStore
    let rateLimiter: RateLimiter

    /// The caller of `request`, once its token is known, live and within its rate limit. `record` is told the caller
    /// before the rate limit is applied, so that a refused request is logged with its token's name.
    func authenticate(_ request: Request, record: (Caller) -> Void = { _ in }) async throws -> Caller {
        guard let header = request.headers[.authorization] else { throw Problem.unauthorized() }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { throw Problem.unauthorized() }
        let token = parts[1].trimmingSpaces()
        guard !token.isEmpty, token.utf8.count <= AccessTokens.maximumLength else { throw Problem.unauthorized() }
        let hash = AccessTokens.hash(token)
        guard let stored = try await store.token(hash: hash), Hashing.constantTimeEqual(stored.hash, hash),
            !stored.isRevoked
        else {
            throw Problem.unauthorized()
        }
        let caller = Caller(name: stored.name, scopes: stored.scopes)
        record(caller)
        if let wait = rateLimiter.acquire(stored.name) {
            throw Problem(
                .tooManyRequests,
                code: "rate_limited",
                detail: "this token is over its rate limit; retry later",
                headers: [.retryAfter: "\(wait)"]
            )
        }
        return caller
    }

    /// For a route outside the token-guarded groups: the caller, with `scope`, put in `context` when it carries one
    /// (for the access log).
    func authorize(_ request: Request, _ context: some RequestContext, scope: AccessTokenScope) async throws -> Caller {
        let slot = (context as? any CallerRequestContext)?.callerSlot
        let caller = try await authenticate(request, record: { slot?.fill($0) })
        guard caller.scopes.contains(scope) else { throw Problem.forbidden(scope.rawValue) }
        return caller
    }
}

/// Declared on the token-guarded route groups: authenticates the bearer token (``BearerAuthenticator``) and puts the
/// caller in the request's context, where ``RequireScope``, the handlers and the access log read it.
struct BearerAuthentication<Context: CallerRequestContext>: RouterMiddleware {
    let authenticator: BearerAuthenticator

    init(_ authenticator: BearerAuthenticator) { self.authenticator = authenticator }

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        _ = try await authenticator.authenticate(request, record: context.callerSlot.fill)
        return try await next(request, context)
    }
}
