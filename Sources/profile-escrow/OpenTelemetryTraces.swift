import ArgumentParser
import Foundation
import Logging
import OTel
import ServiceLifecycle
import Tracing

/// Traces of `serve` and `replay` over OTLP/HTTP (swift-otel), configured by the standard OpenTelemetry variables.
///
/// Off unless the environment asks for them: `OTEL_TRACES_EXPORTER=otlp`, or an OTLP endpoint
/// (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`). `OTEL_SDK_DISABLED=true` and
/// `OTEL_TRACES_EXPORTER=none` keep them off. Everything else (endpoint, headers, sampler, batching, timeouts,
/// `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`) is swift-otel's reading of the standard variables. The protocol
/// is `http/protobuf` (or `http/json`); gRPC is not built in. Only traces: metrics stay on `/metrics`, logs on stderr.
struct OpenTelemetryTraces {
    let tracer: any Tracer
    let service: any Service

    /// Whether `environment` turns traces on.
    static func requested(by environment: [String: String]) -> Bool {
        if environment["OTEL_SDK_DISABLED"]?.lowercased() == "true" { return false }
        if let exporter = environment["OTEL_TRACES_EXPORTER"]?.lowercased() { return exporter != "none" }
        return environment["OTEL_EXPORTER_OTLP_ENDPOINT"] != nil
            || environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] != nil
    }

    /// Refuses what this build cannot export when `environment` turns traces on: a usage error that names the
    /// variable, before the process starts anything.
    static func validate(_ environment: [String: String]) throws {
        guard requested(by: environment) else { return }
        for variable in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
            guard let chosen = environment[variable] else { continue }
            guard ["http/protobuf", "http/json"].contains(chosen.lowercased()) else {
                throw ValidationError(
                    "\(variable)=\(chosen.prefix(32)): this build exports traces over OTLP/HTTP only "
                        + "(http/protobuf or http/json)"
                )
            }
        }
    }

    /// The tracer and its exporting service when `environment` turns traces on; nil otherwise. A configuration
    /// swift-otel refuses (a gRPC protocol, a malformed value) is a usage error naming it.
    static func make(environment: [String: String], processName: String, logger: Logger) throws -> Self? {
        guard requested(by: environment) else { return nil }
        try validate(environment)
        var configuration = OTel.Configuration.default
        configuration.serviceName = "profile-escrow"
        configuration.resourceAttributes["service.component"] = processName
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        configuration.metrics.enabled = false
        configuration.logs.enabled = false
        // swift-otel's own diagnostics (an export that failed, say) go to this process's log, never the exported data.
        configuration.diagnosticLogger = .custom(logger)
        configuration.diagnosticLogLevel = .warning
        do {
            let backend = try OTel.makeTracingBackend(configuration: configuration)
            return Self(tracer: backend.factory, service: backend.service)
        } catch {
            throw ValidationError("OpenTelemetry traces: \(error)")
        }
    }
}
