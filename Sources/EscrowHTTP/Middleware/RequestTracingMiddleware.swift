import HTTPTypes
import Hummingbird
import Tracing

/// One server span per request, continuing the caller's trace from its W3C `traceparent`.
///
/// Written here rather than Hummingbird's `TracingMiddleware`, which records the request's path and query (`url.path`,
/// `url.query`): a path here holds a user identifier, personal data that must never reach a span. This one records
/// the method, the route template, the status and nothing else. Installed only when the escrow has a tracer.
struct RequestTracingMiddleware<Context: RequestContext>: RouterMiddleware {
    let tracer: any Tracer

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var parent = ServiceContext.current ?? .topLevel
        tracer.extract(request.headers, into: &parent, using: HTTPFieldsExtractor())
        let method = String(request.method.rawValue.prefix(16))
        let span = tracer.startSpan("HTTP \(method)", context: parent, ofKind: .server)
        defer { span.end() }
        span.attributes["http.request.method"] = method
        do {
            let response = try await ServiceContext.$current.withValue(span.context) {
                try await next(request, context)
            }
            finish(span, method: method, route: context.endpointPath, status: Int(response.status.code))
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            finish(span, method: method, route: context.endpointPath, status: Int(status))
            throw error
        }
    }

    private func finish(_ span: any Span, method: String, route: String?, status: Int) {
        if let route {
            span.operationName = "\(method) \(route)"
            span.attributes["http.route"] = route
        }
        span.attributes["http.response.status_code"] = status
        if status >= 500 { span.setStatus(SpanStatus(code: .error)) }
    }
}

/// Reads a propagated trace context (`traceparent`, `tracestate`) from a request's fields.
struct HTTPFieldsExtractor: Extractor {
    func extract(key: String, from fields: HTTPFields) -> String? {
        HTTPField.Name(key).flatMap { fields[$0] }
    }
}
