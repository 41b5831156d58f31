import EscrowCore
import Foundation
import Hummingbird
import Logging
import ProfileEscrow
import Prometheus

/// `/healthz` (the process answers), `/readyz` (the store answers), `/metrics` (Prometheus text).
struct OperationalRoutes: Sendable {
    let escrow: Escrow
    let auth: BearerAuthenticator
    let registry: PrometheusCollectorRegistry
    let metricsRequireToken: Bool
    /// Requests without a token (probes, an open `/metrics`) share a bucket per route.
    let anonymous: RateLimiter
    /// Set at graceful shutdown: `/readyz` answers `503`.
    var draining: DrainState? = nil

    func register<Context: RequestContext>(on router: some RouterMethods<Context>) {
        router.get("/healthz") { _, _ in
            try anonymous.admit("healthz")
            return JSONResponse.make(.ok, ["status": "ok"])
        }
        router.get("/readyz") { _, context in try await ready(context) }
        router.get("/metrics") { request, _ in try await metrics(request) }
    }

    /// One indexed read of the audit head's single row: cheap however large the store is.
    func ready(_ context: some RequestContext) async throws -> Response {
        try anonymous.admit("readyz")
        if draining?.isDraining == true {
            throw Problem(
                .serviceUnavailable,
                code: "draining",
                detail: "the process is shutting down",
                headers: [.retryAfter: "1"]
            )
        }
        do {
            _ = try await escrow.store.auditHead()
        } catch {
            context.logger.warning("not ready: the store does not answer", metadata: ["error": "\(error)"])
            throw Problem(
                .serviceUnavailable,
                code: "store_unavailable",
                detail: "the store does not answer",
                headers: [.retryAfter: "1"]
            )
        }
        // The keyring's custody engine failed at the last reload: the keys in use still work, but the next
        // rotation or restart would not; the reason names the engine, never a secret.
        if let custody = escrow.custodyHealth.problem {
            throw Problem(
                .serviceUnavailable,
                code: "custody_unavailable",
                detail: "the keyring's custody engine failed at the last reload (\(custody.code)): \(custody.message)",
                headers: [.retryAfter: "5"]
            )
        }
        return JSONResponse.make(.ok, ["status": "ready", "captureOnly": .bool(escrow.isCaptureOnly)])
    }

    func metrics(_ request: Request) async throws -> Response {
        if metricsRequireToken {
            _ = try await auth.authorize(request, scope: .metrics)
        } else {
            try anonymous.admit("metrics")
        }
        // Counters and gauges only, as last published: the live gauges are refreshed off the request path
        // (the replay worker's sweep, or LiveGaugeRefresher), so a scrape never queries the store.
        return Self.exposition(registry)
    }

    /// The registry as Prometheus text, with help lines.
    static func exposition(_ registry: PrometheusCollectorRegistry) -> Response {
        let buffer = EscrowPrometheus.emit(registry)
        return Response(
            status: .ok,
            headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: buffer))
        )
    }
}
