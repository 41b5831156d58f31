import EscrowCore
import Foundation
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import ProfileEscrow
import Prometheus

/// `/healthz` (the process answers), `/readyz` (the store answers), `/metrics` (Prometheus text).
struct OperationalRoutes: Sendable {
    let escrow: Escrow
    let auth: BearerAuthenticator
    let registry: PrometheusCollectorRegistry
    let metricsRequireToken: Bool
    /// An open `/metrics`: a bucket per client, and one for all (probes are never limited).
    let anonymous: ClientRateLimiter
    /// Set at graceful shutdown: `/readyz` answers `503`.
    var draining: DrainState? = nil
    /// Set when Apple's codes are exchanged (and tokens revoked) here: `/readyz` tells whether client secrets could
    /// be signed, and stays `200` either way (captures go on; exchanges and revocations wait and retry).
    var appleSigning: AppleSigningHealth? = nil

    func register<Context: CallerRequestContext>(on router: some RouterMethods<Context>) {
        Self.registerHealth(on: router)
        router.get("/readyz") { _, context in try await ready(context) }
        // Counters and gauges only, as last published: the live gauges are refreshed off the request path (the
        // replay worker's sweep, or LiveGaugeRefresher), so a scrape never queries the store.
        if metricsRequireToken {
            router.group()
                .add(middleware: BearerAuthentication(auth))
                .add(middleware: RequireScope(.metrics))
                .get("/metrics") { _, _ in Self.exposition(registry) }
        } else {
            router.get("/metrics") { request, context in
                try anonymous.admit("metrics", request, context)
                return Self.exposition(registry)
            }
        }
    }

    /// `/healthz`: the process answers. Also the public listener's, which has no other operational route.
    /// Never rate-limited: a load balancer must not take a node out because another client floods it.
    static func registerHealth<Context: RequestContext>(on router: some RouterMethods<Context>) {
        router.get("/healthz") { _, _ in JSONResponse.make(.ok, ["status": "ok"]) }
    }

    /// The most `/readyz` waits for the store: a probe gets its answer within 2 s even when the store is cut off
    /// and its own operations wait out their longer bound.
    static let readinessBound: Duration = .seconds(1)

    /// The store's own check (``EscrowStore/checkReady()``: one indexed read of the audit head's single row, and
    /// whether the store takes writes), within ``readinessBound``.
    func ready(_ context: some RequestContext) async throws -> Response {
        if draining?.isDraining == true {
            throw Problem(
                .serviceUnavailable,
                code: "draining",
                detail: "the process is shutting down",
                headers: [.retryAfter: "1"]
            )
        }
        let store = escrow.store
        do {
            try await Self.within(Self.readinessBound) { try await store.checkReady() }
        } catch let error as EscrowStoreError where error.code == .readOnly {
            context.logger.warning("not ready: the store takes no writes", metadata: ["error": "\(error.message)"])
            throw Problem(
                .serviceUnavailable,
                code: "read_only",
                detail: "the store takes no writes (a standby, or a store open read-only)",
                headers: [.retryAfter: "5"]
            )
        } catch {
            let reason = (error as? EscrowStoreError)?.message ?? "\(error)"
            context.logger.warning("not ready: the store does not answer", metadata: ["error": "\(reason)"])
            throw Problem(
                .serviceUnavailable,
                code: "store_unavailable",
                detail: "the store does not answer",
                headers: [.retryAfter: "1"]
            )
        }
        // The keyring's custody engine failed (at start: this node captures but opens nothing; at a reload: the
        // keys in use still work). A stranger learns only that: the engine's address, mount, key name and error are
        // in the reloader's log lines, never in this unauthenticated answer.
        if escrow.custodyHealth.problem != nil {
            throw Problem(
                .serviceUnavailable,
                code: "custody_unavailable",
                detail: escrow.custodyHealth.publicDetail,
                headers: [.retryAfter: "5"]
            )
        }
        var answer: [String: JSONValue] = ["status": "ready", "captureOnly": .bool(escrow.isCaptureOnly)]
        if let appleSigning { answer["appleSigning"] = .string(appleSigning.state.rawValue) }
        return JSONResponse.make(.ok, answer)
    }

    /// What `body` returns, or `ReadinessTimedOut` once `bound` has passed; `body` is then left behind in its own
    /// task (a task group would wait for it), and ends within the store's own bound.
    static func within(_ bound: Duration, _ body: @escaping @Sendable () async throws -> Void) async throws {
        let first = NIOLockedValueBox<CheckedContinuation<Void, any Error>?>(nil)
        @Sendable func resume(_ result: Result<Void, any Error>) {
            let taken = first.withLockedValue { value in
                defer { value = nil }
                return value
            }
            taken?.resume(with: result)
        }
        try await withCheckedThrowingContinuation { continuation in
            first.withLockedValue { $0 = continuation }
            let timer = Task {
                try await Task.sleep(for: bound)
                resume(.failure(ReadinessTimedOut()))
            }
            Task {
                do { try await body() } catch {
                    timer.cancel()
                    return resume(.failure(error))
                }
                timer.cancel()
                resume(.success(()))
            }
        }
    }

    struct ReadinessTimedOut: Error, CustomStringConvertible {
        var description: String { "no answer within \(OperationalRoutes.readinessBound)" }
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
