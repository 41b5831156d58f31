import EscrowCore
import Hummingbird
import Logging

/// One log line per request: method, route template (never the path: it holds a user identifier), status,
/// duration and the name of the caller a token-guarded route group authenticated (never the token).
struct AccessLogMiddleware<Context: CallerRequestContext>: RouterMiddleware {
    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let elapsed = ContinuousClock.now - start
        let milliseconds = elapsed.inSeconds * 1000
        var metadata: Logger.Metadata = [
            "http.method": "\(request.method.rawValue.prefix(16))",
            "http.route": "\(context.endpointPath ?? "unmatched")",
            "http.status": "\(response.status.code)",
            "duration.ms": "\((milliseconds * 10).rounded() / 10)",
        ]
        if let name = context.caller?.name { metadata["http.token"] = "\(name)" }
        context.logger.info("request", metadata: metadata)
        return response
    }
}
