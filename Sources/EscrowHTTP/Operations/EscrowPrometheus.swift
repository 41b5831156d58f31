public import Prometheus

/// Prometheus naming for every series the process exports: the product's (``EscrowMetrics``) and Hummingbird's
/// (`MetricsMiddleware`), with `# HELP` text.
///
/// Hummingbird names its series after OpenTelemetry (`hb.requests`, `http.server.request.duration`); ``factory(registry:)``
/// renames them by Prometheus convention (`_total` counters, `_seconds` durations, snake_case labels), and
/// ``emit(_:)`` adds a `# HELP` line to each family (swift-metrics carries no help text through its factory).
public enum EscrowPrometheus {
    /// Hummingbird's series, renamed.
    static let renamed: [String: String] = [
        "hb.requests": "http_server_requests_total",
        "hb.request.errors": "http_server_request_errors_total",
        "http.server.request.duration": "http_server_request_duration_seconds",
        "http.server.active_requests": "http_server_active_requests",
    ]

    /// Hummingbird's dimensions, renamed.
    static let renamedLabels: [String: String] = [
        "http.route": "route",
        "http.request.method": "method",
        "http.response.status_code": "status",
        "error.type": "error_type",
    ]

    /// Every family's help text.
    public static let help: [String: String] = [
        "http_server_requests_total": "HTTP requests answered, by route template, method and status.",
        "http_server_request_errors_total":
            "HTTP requests that ended in an error, by route template, method and error status.",
        "http_server_request_duration_seconds": "Time to answer an HTTP request, by route template, method and status.",
        "http_server_active_requests": "HTTP requests in progress, by method.",
        "profile_escrow_captures_total": "Profiles captured (sealed and stored).",
        "profile_escrow_capture_failures_total":
            "Captures the store did not take (the caller must retry), by the store's error code.",
        "profile_escrow_purges_total": "Escrows purged, by reason.",
        "profile_escrow_dead_total": "Escrows that became dead (delivery given up), by code.",
        "profile_escrow_deliveries_total": "Deliveries to the registration backend, by outcome.",
        "profile_escrow_delivery_duration_seconds": "Time of one delivery to the registration backend.",
        "profile_escrow_live": "Live escrows by state, read from the store.",
        "profile_escrow_oldest_pending_age_seconds": "Age of the oldest pending escrow (0 when none).",
        "profile_escrow_custody_up":
            "1 when the keyring's custody engine unwrapped it at the last start or reload, else 0.",
        "profile_escrow_custody_failures_total": "Keyring unwraps the custody engine failed or refused, by code.",
        "profile_escrow_signins_total":
            "Web sign-ins: started, completed, answered with the resubmission page, or refused, by outcome.",
        "profile_escrow_signin_redeems_total": "Web sign-in ticket redeems, by outcome (redeemed or gone).",
        "profile_escrow_notifications_forwarded_total":
            "Apple notifications forwarded to the backend, by outcome (full: not queued, the outbox was full).",
        "profile_escrow_apple_notifications_total":
            "Verified Apple notifications received, by type and outcome (duplicate: Apple's retry of one handled).",
        "profile_escrow_notification_outbox_entries":
            "Apple notifications waiting in the outbox to be forwarded, as the forwarder last counted them.",
        "profile_escrow_apple_exchanges_total":
            "Authorization code exchanges at Apple, by outcome (tokens, Apple's error code, timed out, retried).",
        "profile_escrow_apple_revocations_total":
            "Token revocations sent to Apple, by outcome (revoked, retried, failed: given up at the last attempt).",
    ]

    /// The factory to bootstrap `MetricsSystem` with: Hummingbird's names and labels renamed.
    public static func factory(registry: PrometheusCollectorRegistry) -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.nameAndLabelSanitizer = { name, labels in
            (renamed[name] ?? name, labels.map { (renamedLabels[$0.0] ?? $0.0, $0.1) })
        }
        return factory
    }

    /// The registry's text exposition with a `# HELP` line before each known family's `# TYPE` line.
    public static func emit(_ registry: PrometheusCollectorRegistry) -> [UInt8] {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return withHelp(buffer)
    }

    static func withHelp(_ exposition: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(exposition.count + 2048)
        let typePrefix = Array("# TYPE ".utf8)
        var helped: Set<String> = []
        for line in exposition.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            if line.starts(with: Array("# HELP ".utf8)),
                let name = line.dropFirst(7).split(separator: UInt8(ascii: " ")).first
            {
                helped.insert(String(decoding: name, as: UTF8.self))
            }
            if line.starts(with: typePrefix),
                let name = line.dropFirst(typePrefix.count).split(separator: UInt8(ascii: " ")).first
            {
                let family = String(decoding: name, as: UTF8.self)
                if !helped.contains(family), let text = help[family] {
                    out += Array("# HELP \(family) \(text)\n".utf8)
                }
            }
            out += line
            out.append(UInt8(ascii: "\n"))
        }
        if exposition.last == UInt8(ascii: "\n") || exposition.isEmpty { out.removeLast() }
        return out
    }
}
