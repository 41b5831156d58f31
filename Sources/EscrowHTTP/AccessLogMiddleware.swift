import EscrowCore
import Hummingbird
import Logging
import NIOConcurrencyHelpers

/// One log line per request: method, route template (never the path: it holds a user identifier), status,
/// duration and the name of the token that was authorized (never the token).
struct AccessLogMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let start = ContinuousClock.now
        let caller = AccessLogCaller()
        let response = try await AccessLogCaller.$current.withValue(caller) { try await next(request, context) }
        let elapsed = ContinuousClock.now - start
        let milliseconds = elapsed.inSeconds * 1000
        var metadata: Logger.Metadata = [
            "http.method": "\(request.method.rawValue.prefix(16))",
            "http.route": "\(context.endpointPath ?? "unmatched")",
            "http.status": "\(response.status.code)",
            "duration.ms": "\((milliseconds * 10).rounded() / 10)",
        ]
        if let name = caller.tokenName { metadata["http.token"] = "\(name)" }
        context.logger.info("request", metadata: metadata)
        return response
    }
}

/// The token name of the request being handled, written by ``BearerAuthenticator`` for the access log line.
final class AccessLogCaller: Sendable {
    @TaskLocal static var current: AccessLogCaller?

    private let name = NIOLockedValueBox<String?>(nil)

    var tokenName: String? { name.withLockedValue { $0 } }

    func record(_ tokenName: String) { name.withLockedValue { $0 = tokenName } }
}
