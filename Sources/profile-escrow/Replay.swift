import ArgumentParser
import EscrowCore
import EscrowCrypto
import EscrowHTTP
import Foundation
import Logging
import Metrics
import ProfileEscrow
import Prometheus
import ServiceLifecycle

struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Deliver escrows to the registration backend until it confirms them.",
        discussion: """
            The webhook secret (whsec_<base64>) comes from PROFILE_ESCROW_WEBHOOK_SECRET, never from the \
            command line. Without --once the worker runs until SIGTERM or SIGINT, then finishes the deliveries \
            in flight and gives back the leases it holds.
            """
    )
    @OptionGroup var options: GlobalOptions

    @Flag(help: "Deliver what is due now, print a summary and exit.") var once = false
    @Flag(
        help: """
            Send one signed test request (no escrow, no personal data) to the backend, print its status, time and \
            outcome, and exit: 0 when it answered 2xx, 1 otherwise.
            """
    )
    var test = false
    @OptionGroup var worker: WorkerOptions
    @OptionGroup var scheduler: SchedulingOptions
    @Option(
        help: "Serve Prometheus metrics on this port at /metrics (env PROFILE_ESCROW_METRICS_PORT; default none)."
    )
    var metricsPort: Int?
    @Option(
        help: """
            Address of the metrics endpoint (env PROFILE_ESCROW_METRICS_HOST; default \
            \(EscrowHTTPConfiguration.default.host)).
            """
    )
    var metricsHost: String?

    // MARK: Logging and metrics wiring

    var metricsPortValue: Int? { try? OptionEnvironment.process.value(metricsPort, "metrics-port") }
    var metricsHostValue: String {
        (try? OptionEnvironment.process.value(metricsHost, "metrics-host")) ?? EscrowHTTPConfiguration.default.host
    }

    /// The `/metrics` service when `--metrics-port` is set; metrics bootstrapped over its registry.
    func metricsServices(logger: Logger) -> [any Service] {
        guard let port = metricsPortValue else { return [] }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(EscrowPrometheus.factory(registry: registry))
        return [
            EscrowHTTPApplication.metricsOnly(registry: registry, host: metricsHostValue, port: port, logger: logger)
        ]
    }

    func validate() throws {
        try OpenTelemetryTraces.validate(options.environment)
        if test && once { throw ValidationError("--test and --once cannot be combined") }
        if let port = try OptionEnvironment.process.value(metricsPort, "metrics-port"), !(0...65535).contains(port) {
            throw ValidationError("--metrics-port: must be 0-65535")
        }
        _ = try OptionEnvironment.process.value(metricsHost, "metrics-host")
        _ = try worker.workerConfiguration()
        _ = try worker.escrowConfiguration(options)
    }

    func run() async throws {
        let workerConfiguration = try worker.workerConfiguration()
        let keyring = try await options.loadKeyring(createIfDefault: false)
        let logger = options.logger(label: "profile-escrow.replay", longRunning: true)
        try scheduler.apply(logger: logger)
        // Purged bytes are flushed in batches (every few seconds, and at the end) instead of after each purge.
        let opened = try await options.location.open(readOnly: false, batchedPurges: true, logger: logger)
        let (escrow, traces) = try worker.escrow(
            opened: opened,
            keyring: keyring,
            options,
            process: "replay",
            logger: logger
        )
        if test {
            let result = try await OperatorActions(escrow: escrow, backend: workerConfiguration).testDelivery(
                actor: .cli
            )
            print(Self.describe(result))
            if !result.succeeded { throw ExitCode(CLIFailure.problem) }
        } else if once {
            let replayWorker = try ReplayWorker(escrow: escrow, configuration: workerConfiguration, logger: logger)
            let progress = Progress(label: "delivered")
            let summary = try await Self.exporting(traces, logger: logger) {
                try await replayWorker.runOnce { progress.update($0.delivered) }
            }
            progress.finish()
            print("replay: \(summary)")
            if summary.failed > 0 {
                // A run whose outcomes could not all be recorded did not do its work: never exit 0.
                throw EscrowStoreError(
                    .unavailable,
                    "\(summary.failed) delivery outcomes could not be recorded (outcome unknown: the log says why)"
                )
            }
        } else {
            let metrics = metricsServices(logger: logger)
            let services = try EscrowServiceGroup.replayServices(
                escrow: escrow,
                worker: workerConfiguration,
                keyringPath: options.keyringPath,
                logger: logger
            )
            try await EscrowServiceGroup.run(
                (traces.map { [$0.service] } ?? []) + services + metrics,
                shutdownBound: workerConfiguration.gracefulShutdownBound,
                logger: logger
            )
            print("replay: stopped")
        }
    }

    /// `test delivery: status 200, 12 ms, outcome confirmed`; without an answer, `no answer (timeout)` for the status.
    static func describe(_ result: OperatorActions.TestDelivery) -> String {
        let answer = result.status.map { "status \($0)" } ?? "no answer (\(result.failure?.rawValue ?? "unknown"))"
        return "test delivery: \(answer), \(Int(result.milliseconds)) ms, outcome \(result.outcome)"
    }

    /// Runs `body` with the trace exporter beside it, then shuts the exporter down gracefully, which sends the spans
    /// still batched (within the exporter's own timeout).
    static func exporting<T: Sendable>(
        _ traces: OpenTelemetryTraces?,
        logger: Logger,
        _ body: @Sendable () async throws -> T
    ) async throws -> T {
        guard let traces else { return try await body() }
        let group = ServiceGroup(services: [traces.service], gracefulShutdownSignals: [], logger: logger)
        return try await withThrowingTaskGroup(of: T?.self) { tasks in
            tasks.addTask {
                try await group.run()
                return nil
            }
            defer { tasks.cancelAll() }
            let result: T
            do {
                result = try await body()
            } catch {
                await group.triggerGracefulShutdown()
                throw error
            }
            await group.triggerGracefulShutdown()
            _ = try await tasks.next()
            return result
        }
    }
}
