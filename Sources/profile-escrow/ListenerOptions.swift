import ArgumentParser
import EscrowHTTP

/// `serve`'s listeners: where the API and the public routes listen, what `/metrics` and `/console/` require, and how
/// long `/readyz` warns a load balancer before a shutdown. Each also from its `PROFILE_ESCROW_…` variable.
struct ListenerOptions: ParsableArguments {
    static let defaults = EscrowHTTPConfiguration.default

    @Option(help: "Address to bind (env PROFILE_ESCROW_HOST; default \(defaults.host); 0.0.0.0 in a container).")
    var host: String?
    @Option(help: "Port to bind (env PROFILE_ESCROW_PORT; default \(defaults.port)).") var port: Int?
    @Option(
        name: .customLong("public-port"),
        help: """
            A second listener for the browser's and Apple's routes only: web sign-in, /v1/apple/notifications, \
            /healthz; the token-guarded API stays on --port (env PROFILE_ESCROW_PUBLIC_PORT).
            """
    )
    var publicPort: Int?
    @Option(
        name: .customLong("public-host"),
        help: "Address of the --public-port listener (env PROFILE_ESCROW_PUBLIC_HOST; default --host)."
    )
    var publicHost: String?
    @Flag(
        name: .customLong("no-console"),
        help: "Do not answer the operator console at /console/ (env PROFILE_ESCROW_NO_CONSOLE=true)."
    )
    var noConsole = false
    @Flag(
        name: .customLong("metrics-token"),
        help: "Require a token with the metrics scope for /metrics (env PROFILE_ESCROW_METRICS_TOKEN=true)."
    )
    var metricsToken = false
    @Option(
        help: """
            How long /readyz answers 503 after SIGTERM before the server stops taking requests \
            (env PROFILE_ESCROW_DRAIN_DELAY; default \(DefaultText.duration(defaults.drainDelay))).
            """
    )
    var drainDelay: String?

    /// Sets the listeners of `http`; a malformed or contradictory value is a usage error.
    func apply(to http: inout EscrowHTTPConfiguration, _ environment: OptionEnvironment) throws {
        http.host = try environment.value(host, "host") ?? http.host
        http.port = try environment.value(port, "port") ?? http.port
        http.console = try !environment.flag(noConsole, "no-console")
        http.metricsRequireToken = try environment.flag(metricsToken, "metrics-token")
        if let seconds = try WorkerOptions.duration(drainDelay, "drain-delay", environment) {
            http.drainDelay = .milliseconds(Int64(seconds * 1000))
        }
        guard (0...65535).contains(http.port) else { throw ValidationError("--port: must be 0-65535") }
        http.publicPort = try environment.value(publicPort, "public-port")
        http.publicHost = try environment.value(publicHost, "public-host")
        if let publicPort = http.publicPort {
            guard (0...65535).contains(publicPort) else { throw ValidationError("--public-port: must be 0-65535") }
            guard publicPort == 0 || publicPort != http.port else {
                throw ValidationError("--public-port must differ from --port")
            }
        } else if http.publicHost != nil {
            throw ValidationError("--public-host needs --public-port")
        }
    }
}
