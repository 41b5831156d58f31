public import EscrowCore
import Foundation
public import Logging
import PostgresNIO

/// The scale-out store: escrows, the audit chain, Apple notification records and the HTTP API's tokens in one
/// PostgreSQL database, shared by any number of service and worker nodes.
///
/// The same semantics as the SQLite store: a capture returns only once its COMMIT returned with
/// `synchronous_commit` on (checked at open: `off` and `local` are refused), one live escrow per user (a unique
/// index on the blind index), a purge and its audit events in one transaction, claims with
/// `FOR UPDATE SKIP LOCKED` and compare-and-set on the revision (the fencing token), one audit chain for all nodes
/// (appends serialize on its head row), and concurrent captures of one node sharing one transaction (group commit).
///
/// ## Lifetime
///
/// ``connect(url:configuration:logger:)`` starts the connection pool's run loop (`PostgresClient.run()`) in a task
/// the store owns, checks the server, and applies missing migrations; the store is usable when it returns, and
/// there is nothing else to start. ``close()`` ends the run loop once the store's last operation returned;
/// releasing the store ends it too. Operations after ``close()`` fail with ``EscrowStoreError/Code/unavailable``.
public final class PostgresEscrowStore: EscrowStore, Sendable {
    public struct Configuration: Sendable {
        /// Write nothing and apply no migration (the schema must be current): for `status` and `purge-report`.
        /// The connections also start with `default_transaction_read_only`, so the server refuses any write.
        public var readOnly: Bool = false
        /// Apply missing migrations at open (the role must be allowed to create tables). When false, or when the
        /// schema is already current, no DDL runs, so the service role needs no more than its grants on the tables.
        public var migrate: Bool = true
        /// The most connections the pool opens.
        public var maximumConnections: Int = 20
        /// The most captures (and the most lifecycle actions, and the most sign-in completions) one group-commit
        /// transaction holds.
        public var maximumBatch: Int = 256
        /// How long an operation waits for a pooled connection, in seconds, before it fails with
        /// ``EscrowStoreError/Code/unavailable``: while the server is down or restarting, captures fail fast (HTTP
        /// 503) instead of hanging, and the pool reconnects by itself.
        public var connectionWaitTimeout: Double = 5
        /// The most any operation takes, in seconds, from its call to its end (the wait for a connection included):
        /// past it, the operation fails with ``EscrowStoreError/Code/unavailable`` and its connection is closed.
        /// Bounds every operation on a silent network partition (a socket that looks alive but answers nothing).
        /// The server is also told to end a session idle in a transaction for this long
        /// (`idle_in_transaction_session_timeout`), so a node cut off mid-transaction does not hold its row locks,
        /// and to drop a peer that stops acknowledging (`tcp_user_timeout`, TCP keepalives).
        public var operationTimeout: Double = 5

        public init() {}
    }

    public let url: PostgresURL
    public let configuration: Configuration
    /// `SHOW server_version`, for the startup log.
    public let serverVersion: String
    /// `SHOW synchronous_commit` at open (never `off` or `local`).
    public let synchronousCommit: String

    let database: StoreDatabase
    let captures: CaptureBatcher
    let commits: CommitBatcher
    let signIns: SignInBatcher

    /// Connects to `url` (`postgres://` or `postgresql://`, see ``PostgresURL``), checks that commits are durable,
    /// and applies missing migrations (``Configuration/migrate``). Fails with a PII-free, password-free error.
    public static func connect(
        url text: String,
        configuration: Configuration = Configuration(),
        logger: Logger
    ) async throws -> PostgresEscrowStore {
        let url = try PostgresURL(text)
        let bound = max(0.1, configuration.operationTimeout)
        let startup =
            (configuration.readOnly ? [("default_transaction_read_only", "on")] : []) + sessionBounds(bound)
        // Several hosts, or target_session_attrs: the first host, in order, that is what the URL asks for.
        var chosen = url
        if url.endpoints.count > 1 || url.targetSessionAttributes != .any {
            guard let found = await HostPool.choose(url, startup: startup, timeout: bound, logger: logger) else {
                throw EscrowStoreError(
                    .unavailable,
                    "cannot open the store: no host of \(url) answers as "
                        + "target_session_attrs=\(url.targetSessionAttributes.rawValue) asks"
                )
            }
            chosen = found.url
        }
        // One connection of its own first: a wrong password or an unreachable server fails here at once (the pool
        // would retry), and a server whose commits are not durable is refused before anything is written.
        let (version, synchronous, standby) = try await checkServer(chosen, startup: startup, logger: logger)
        if standby && !configuration.readOnly {
            logger.warning(
                """
                the PostgreSQL server is a standby in recovery: it takes no writes. Until it is promoted, or the URL \
                reaches the primary, captures answer 503 read_only and /readyz answers 503
                """,
                metadata: ["url": "\(url)"]
            )
        }
        let maximumConnections = max(1, configuration.maximumConnections)
        let hosts = try HostPool(url: url, chosen: chosen, startup: startup, probeTimeout: bound, logger: logger) {
            chosen in
            var clientConfiguration = try chosen.clientConfiguration()
            clientConfiguration.options.maximumConnections = maximumConnections
            clientConfiguration.options.additionalStartupParameters += startup
            if chosen.connectTimeout == nil {
                clientConfiguration.options.connectTimeout = .milliseconds(Int64(bound * 1_000))
            }
            return PostgresClient(configuration: clientConfiguration, backgroundLogger: logger)
        }
        let database = StoreDatabase(
            hosts: hosts,
            logger: logger,
            readOnly: configuration.readOnly,
            place: url.description,
            connectionWait: max(0.1, configuration.connectionWaitTimeout),
            operationTimeout: max(0.1, configuration.operationTimeout)
        )
        do {
            if configuration.migrate && !configuration.readOnly {
                // DDL on a large table may take long: the migrations have an hour, not the operations' bound.
                let applied = try await StoreDatabase.$callerDeadline.withValue(ContinuousClock.now + .seconds(3_600)) {
                    try await PostgresSchema.migrate(database, logger: logger)
                }
                if !applied.isEmpty {
                    logger.notice("applied schema migrations", metadata: ["versions": "\(applied)"])
                }
            } else {
                try await PostgresSchema.requireCurrent(database, logger: logger)
            }
            let store = PostgresEscrowStore(
                url: url,
                configuration: configuration,
                serverVersion: version,
                synchronousCommit: synchronous,
                database: database
            )
            logger.info(
                "opened PostgreSQL store",
                metadata: [
                    "url": "\(url)", "postgres.version": "\(version)", "synchronous_commit": "\(synchronous)",
                    "mode":
                        "\(configuration.readOnly ? "read-only" : standby ? "read-write (server in recovery)" : "read-write")",
                ]
            )
            return store
        } catch {
            await hosts.close()
            throw database.storeError(error, "cannot open the store at \(url)")
        }
    }

    private init(
        url: PostgresURL,
        configuration: Configuration,
        serverVersion: String,
        synchronousCommit: String,
        database: StoreDatabase
    ) {
        self.url = url
        self.configuration = configuration
        self.serverVersion = serverVersion
        self.synchronousCommit = synchronousCommit
        self.database = database
        let bound = Duration.milliseconds(Int64(database.operationTimeout * 1_000))
        let batching = (maximumBatch: configuration.maximumBatch, bound: bound)
        captures = Self.groupCommit(database, batching, "capture failed") {
            try await StoreEngine.captureQueueingCodes($0, in: $1)
        }
        commits = Self.groupCommit(database, batching, "commit failed") { try await StoreEngine.commit($0, in: $1) }
        signIns = Self.groupCommit(database, batching, "completing a sign-in failed") {
            try await StoreEngine.completeSignIns($0, in: $1)
        }
    }

    deinit {
        database.hosts.cancel()
    }

    /// Closes the pool's connections and ends its run loop. Call it once the store's operations have returned.
    public func close() async {
        await database.hosts.close()
    }

    /// How this store writes, for the startup log.
    public var mode: String {
        configuration.readOnly
            ? "read-only"
            : "group commit per node, audit appends serialized on the chain's head row"
    }

    /// Startup parameters that make the server give up on a node it cannot reach, as the node gives up on the
    /// server after `bound` seconds: a session idle in a transaction (the node was cut off between two statements,
    /// or its COMMIT never arrived) ends and releases its locks; a peer that stops acknowledging is dropped (TCP
    /// keepalive probes on an idle connection, `tcp_user_timeout` on unacknowledged data). Ignored on a Unix socket.
    static func sessionBounds(_ bound: Double) -> [(String, String)] {
        let milliseconds = Int((bound * 1_000).rounded(.up))
        let seconds = max(1, Int(bound.rounded(.up)))
        return [
            ("idle_in_transaction_session_timeout", "\(milliseconds + 1_000)"),
            ("tcp_user_timeout", "\(milliseconds)"),
            ("tcp_keepalives_idle", "\(seconds)"),
            ("tcp_keepalives_interval", "\(seconds)"),
            ("tcp_keepalives_count", "3"),
        ]
    }

    /// The server's version, and refuses a server whose commits are not durable when they return.
    private static func checkServer(
        _ url: PostgresURL,
        startup: [(String, String)],
        logger: Logger
    ) async throws -> (String, String, Bool) {
        let place = url.description
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(
                configuration: url.connectionConfiguration(startupParameters: startup),
                id: 0,
                logger: logger
            )
        } catch {
            throw StoreDatabase.openError(error, place: place)
        }
        do {
            let result = try await check(connection, logger: logger)
            try? await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw StoreDatabase.openError(error, place: place)
        }
    }

    /// The server's version, its `synchronous_commit`, and whether it is a standby in recovery.
    private static func check(_ connection: PostgresConnection, logger: Logger) async throws -> (String, String, Bool) {
        let version: String =
            try await connection.query("SHOW server_version", logger: logger)
            .collect().map { try $0.decode(String.self) }.first ?? "?"
        let synchronous =
            try await connection.query("SHOW synchronous_commit", logger: logger)
            .collect().map { try $0.decode(String.self) }.first ?? "?"
        guard synchronous != "off" else {
            throw EscrowStoreError(
                .unavailable,
                "PostgreSQL runs with synchronous_commit=\(synchronous): a capture could be acknowledged and then "
                    + "lost in a crash. Set synchronous_commit to on (or remote_write, remote_apply) for this "
                    + "database or role"
            )
        }
        if synchronous == "local" {
            throw EscrowStoreError(
                .unavailable,
                "PostgreSQL runs with synchronous_commit=local: with a synchronous standby configured, a capture "
                    + "could be acknowledged before the standby has it. Set synchronous_commit to on (or "
                    + "remote_write, remote_apply) for this database or role"
            )
        }
        let standby =
            try await connection.query("SELECT pg_is_in_recovery()", logger: logger)
            .collect().map { try $0.decode(Bool.self) }.first ?? false
        return (version, synchronous, standby)
    }
}
