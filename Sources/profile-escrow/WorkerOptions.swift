import ArgumentParser
import EscrowCore
import Foundation
import ProfileEscrow

/// The replay worker's tuning, shared by `replay` and `serve`.
struct WorkerOptions: ParsableArguments {
    @Option(help: "The backend's registration URL (env PROFILE_ESCROW_BACKEND_URL).") var backend: String?
    @Option(help: "Deliveries in flight at once.") var concurrency = 4
    @Option(help: "Attempts before a retryable failure makes an escrow dead.") var maxAttempts = 50
    @Option(help: "First backoff ceiling, e.g. 1s (doubles per attempt, full jitter).") var backoffBase = "1s"
    @Option(help: "Largest wait between attempts, Retry-After included.") var backoffMax = "1h"
    @Option(
        help: "How long a claimed escrow stays this worker's: at least --delivery-timeout plus 10% of it (at most 5s)."
    )
    var lease = "2m"
    @Option(help: "The most one delivery may take, reading the answer included.") var deliveryTimeout = "30s"
    @Option(help: "How long to wait for a confirm call after a 202 before delivering again.") var confirmTimeout = "1h"
    @Option(help: "How often an idle worker looks for due escrows.") var pollInterval = "1s"
    @Option(help: "How often expired escrows are purged while running.") var sweepInterval = "1m"
    @Option(help: "The worker's name in leases and audit events (default <host>-<pid>-<random>).") var workerId: String?

    static let secretVariable = "PROFILE_ESCROW_WEBHOOK_SECRET"
    static let backendVariable = "PROFILE_ESCROW_BACKEND_URL"

    /// The worker's settings from options and environment; every problem is a usage error (exit 2).
    func workerConfiguration() throws -> ReplayWorker.Configuration {
        let environment = ProcessInfo.processInfo.environment
        guard let url = backend ?? environment[Self.backendVariable], !url.isEmpty else {
            throw ValidationError("--backend: give the registration URL (or set \(Self.backendVariable))")
        }
        guard let secret = environment[Self.secretVariable], !secret.isEmpty else {
            throw ValidationError(
                "no webhook secret: set \(Self.secretVariable) to whsec_<base64>. Every delivery is signed so the "
                    + "backend can verify it; unsigned deliveries are not supported."
            )
        }
        do {
            var configuration = try ReplayWorker.Configuration(backendURL: url, webhookSecret: secret)
            configuration.concurrency = concurrency
            configuration.leaseDuration = try WorkerOptions.duration(lease, option: "lease")
            configuration.deliveryTimeout = try WorkerOptions.duration(deliveryTimeout, option: "delivery-timeout")
            configuration.pollInterval = try WorkerOptions.duration(pollInterval, option: "poll-interval")
            configuration.sweepInterval = try WorkerOptions.duration(sweepInterval, option: "sweep-interval")
            if let workerId { configuration.workerID = workerId }
            try configuration.validate()
            return configuration
        } catch let error as EscrowError {
            throw ValidationError(error.message)
        }
    }

    func escrowConfiguration(_ options: GlobalOptions) throws -> EscrowConfiguration {
        guard (1...10_000).contains(maxAttempts) else { throw ValidationError("--max-attempts: must be 1 to 10000") }
        var configuration = options.escrowConfiguration
        let base = try WorkerOptions.duration(backoffBase, option: "backoff-base")
        let cap = try WorkerOptions.duration(backoffMax, option: "backoff-max")
        guard base <= cap else { throw ValidationError("--backoff-base must not exceed --backoff-max") }
        configuration.retryPolicy = RetryPolicy(maxAttempts: maxAttempts, base: base, cap: cap)
        configuration.confirmTimeout = try WorkerOptions.duration(confirmTimeout, option: "confirm-timeout")
        return configuration
    }

    static func duration(_ text: String, option: String) throws -> Double {
        guard let seconds = DurationParser.seconds(text), seconds > 0 else {
            throw ValidationError("--\(option): '\(text)' is not a duration such as 250ms, 5s, 10m, 1h")
        }
        return seconds
    }
}
