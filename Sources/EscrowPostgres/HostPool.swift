import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// The connection pool the store uses now, and, for a URL that names several hosts, the move to another of them
/// when this one fails or stops taking what `target_session_attrs` asks for (a failover): as libpq does at each
/// connection, the store probes the hosts in order and uses the first that is what it asks for.
///
/// A probe starts when an operation fails as unavailable or read-only (at most one at a time, and at most one a
/// second); it connects to each host with the operation bound as its timeout and asks `pg_is_in_recovery()`. When it
/// chooses another host, a new pool starts for it and the old one is closed: operations in flight on the old pool
/// fail (`store_unavailable`), the next ones use the new host.
final class HostPool: Sendable {
    private struct State {
        var client: PostgresClient
        var runner: Task<Void, Never>
        var chosen: PostgresURL
        var lastProbe: ContinuousClock.Instant?
        var probing = false
        var closed = false
    }

    let url: PostgresURL
    private let state: NIOLockedValueBox<State>
    private let makeClient: @Sendable (PostgresURL) throws -> PostgresClient
    private let startup: [(String, String)]
    private let probeTimeout: Double
    private let logger: Logger

    /// Starts the pool of `chosen` (one host of `url`), made by `makeClient`.
    init(
        url: PostgresURL,
        chosen: PostgresURL,
        startup: [(String, String)],
        probeTimeout: Double,
        logger: Logger,
        makeClient: @escaping @Sendable (PostgresURL) throws -> PostgresClient
    ) throws {
        self.url = url
        self.makeClient = makeClient
        self.startup = startup
        self.probeTimeout = probeTimeout
        self.logger = logger
        let client = try makeClient(chosen)
        // Started at once, in this call, up to its first suspension: the pool runs before the first lease.
        let runner = Task.immediate { await client.run() }
        state = NIOLockedValueBox(State(client: client, runner: runner, chosen: chosen))
    }

    /// The pool to lease from now.
    var client: PostgresClient { state.withLockedValue { $0.client } }

    /// Whether another host could be chosen.
    var canMove: Bool { url.endpoints.count > 1 }

    /// An operation failed as unavailable or read-only: look for the host to use, in the background.
    func operationFailed() {
        guard canMove else { return }
        let start = state.withLockedValue { state -> Bool in
            let now = ContinuousClock.now
            guard !state.probing, !state.closed, state.lastProbe.map({ now - $0 >= .seconds(1) }) ?? true else {
                return false
            }
            state.probing = true
            state.lastProbe = now
            return true
        }
        guard start else { return }
        Task {
            let found = await Self.choose(url, startup: startup, timeout: probeTimeout, logger: logger)
            move(to: found?.url)
        }
    }

    private func move(to next: PostgresURL?) {
        let old = state.withLockedValue { state -> (PostgresClient, Task<Void, Never>)? in
            state.probing = false
            guard !state.closed, let next, next.host != state.chosen.host || next.port != state.chosen.port else {
                return nil
            }
            guard let client = try? makeClient(next) else { return nil }
            let runner = Task { await client.run() }
            defer {
                state.client = client
                state.runner = runner
                state.chosen = next
            }
            return (state.client, state.runner)
        }
        guard let old else { return }
        logger.warning(
            "PostgreSQL: moved to another host of the URL",
            metadata: ["url": "\(url)", "host": "\(next.map { "\($0.host ?? ""):\($0.port)" } ?? "")"]
        )
        old.1.cancel()
    }

    /// Ends the pool's run loop without waiting for it (a store released without ``close()``).
    func cancel() {
        state.withLockedValue { $0.runner }.cancel()
    }

    /// Ends the pool's run loop.
    func close() async {
        let runner = state.withLockedValue { state in
            state.closed = true
            return state.runner
        }
        runner.cancel()
        await runner.value
    }

    /// The first host of `url`, in order, that `target_session_attrs` accepts (for `prefer-standby`, a standby if
    /// any answers, else the first that answers), with whether it is a standby; nil when none answers as asked.
    static func choose(
        _ url: PostgresURL,
        startup: [(String, String)],
        timeout: Double,
        logger: Logger
    ) async -> (url: PostgresURL, standby: Bool)? {
        let candidates = url.endpoints.isEmpty ? [url] : url.endpoints.map { url.at($0) }
        var fallback: (url: PostgresURL, standby: Bool)?
        for candidate in candidates {
            guard let standby = await isStandby(candidate, startup: startup, timeout: timeout, logger: logger) else {
                continue
            }
            if url.targetSessionAttributes.accepts(standby: standby) { return (candidate, standby) }
            if url.targetSessionAttributes == .preferStandby, fallback == nil { fallback = (candidate, standby) }
        }
        return fallback
    }

    /// Whether the server at `url` is in recovery; nil when it does not answer within `timeout` seconds.
    static func isStandby(
        _ url: PostgresURL,
        startup: [(String, String)],
        timeout: Double,
        logger: Logger
    ) async -> Bool? {
        guard var configuration = try? url.connectionConfiguration(startupParameters: startup) else { return nil }
        configuration.options.connectTimeout = .milliseconds(Int64(timeout * 1_000))
        guard
            let connection = try? await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        else { return nil }
        let deadline = ContinuousClock.now + .milliseconds(Int64(timeout * 1_000))
        let standby = try? await StoreDatabase.untilLost(connection, deadline: deadline) {
            try await connection.query("SELECT pg_is_in_recovery()", logger: logger).collect()
                .map { try $0.decode(Bool.self) }.first
        }
        try? await connection.close()
        return standby
    }
}
