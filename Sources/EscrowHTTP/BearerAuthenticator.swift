import EscrowCore
import EscrowCrypto
import Hummingbird

/// `Authorization: Bearer <token>`: 401 when missing, unknown or revoked; 429 past the token's rate
/// limit; 403 when the token lacks the scope.
struct BearerAuthenticator: Sendable {
    let store: any AccessTokenStore
    let rateLimiter: RateLimiter

    func authorize(_ request: Request, scope: AccessTokenScope) async throws -> AccessTokenRecord {
        guard let header = request.headers[.authorization] else { throw Problem.unauthorized() }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { throw Problem.unauthorized() }
        let token = parts[1].trimmingSpaces()
        guard !token.isEmpty, token.utf8.count <= AccessTokens.maximumLength else { throw Problem.unauthorized() }
        let hash = AccessTokens.hash(token)
        guard let record = try await store.token(hash: hash), Hashing.constantTimeEqual(record.hash, hash),
            !record.isRevoked
        else {
            throw Problem.unauthorized()
        }
        AccessLogCaller.current?.record(record.name)
        if let wait = rateLimiter.acquire(record.name) {
            throw Problem(
                .tooManyRequests,
                code: "rate_limited",
                detail: "this token is over its rate limit; retry later",
                headers: [.retryAfter: "\(wait)"]
            )
        }
        guard record.scopes.contains(scope) else { throw Problem.forbidden(scope.rawValue) }
        return record
    }
}
