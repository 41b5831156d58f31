public import Tracing

/// Spans of the escrow's operations, through swift-distributed-tracing, to the tracer of
/// ``EscrowConfiguration/tracer``. Without one (the default) nothing is created (no span, no task-local read), so
/// capture and replay cost what they cost untraced.
///
/// Span names and attributes carry no personal data, ever: escrow ids, attempts, outcomes, counts and statuses only.
/// A user identifier is never one (it is personal data, and its blind index is a keyed hash meant for the store).
/// A thrown error is recorded on its span: the product's errors never carry personal data either.
package enum EscrowTracing {
    /// Runs `body` in a span named `operation` (a child of the task's current span) when `tracer` is set; `body`
    /// gets the span to add attributes to, or nil.
    @inlinable
    package static func withSpan<T>(
        _ tracer: (any Tracer)?,
        _ operation: String,
        ofKind kind: SpanKind = .internal,
        _ body: ((any Span)?) async throws -> T
    ) async rethrows -> T {
        guard let tracer else { return try await body(nil) }
        return try await tracer.withAnySpan(operation, ofKind: kind, body)
    }

    /// The synchronous form (sealing).
    @inlinable
    package static func withSpan<T>(
        _ tracer: (any Tracer)?,
        _ operation: String,
        _ body: () throws -> T
    ) rethrows
        -> T
    {
        guard let tracer else { return try body() }
        return try tracer.withAnySpan(operation, body)
    }
}

extension Tracer {
    /// `withSpan` with the span as an existential, so that it runs on an `any Tracer`.
    @inlinable
    package func withAnySpan<T>(
        _ operation: String,
        ofKind kind: SpanKind,
        _ body: ((any Tracing.Span)?) async throws -> T
    ) async rethrows -> T {
        try await withSpan(operation, ofKind: kind) { span in try await body(span) }
    }

    @inlinable
    package func withAnySpan<T>(_ operation: String, _ body: () throws -> T) rethrows -> T {
        try withSpan(operation) { _ in try body() }
    }
}
