import EscrowCore
import Foundation
import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// The pool and how the store talks through it: transactions (retried on a deadlock or serialization failure,
/// which roll back everything), reads, and PII-free errors.
struct StoreDatabase: Sendable {
    /// The pool of the host in use (see ``HostPool``: a multi-host URL may move to another).
    let hosts: HostPool
    let logger: Logger
    let readOnly: Bool
    /// Where the store connects, without the password: for error messages.
    let place: String
    /// How long an operation waits for a pooled connection (seconds) before it fails with `store_unavailable`.
    let connectionWait: Double
    /// The most an operation takes (seconds), waiting for its connection included: past it, the operation fails
    /// with `store_unavailable` and its connection is closed (see ``untilLost(_:deadline:_:)``).
    let operationTimeout: Double

    /// When the current caller's operation must have ended: set by an entry point whose work is done in a task of
    /// someone else's (a group commit's batch is written for its oldest caller, in a task that inherits it), so the
    /// bound runs from the call and not from the lease; or by one allowed longer (the migrations at open).
    @TaskLocal static var callerDeadline: ContinuousClock.Instant?

    /// The deadline of an operation starting now: the caller's if set, else ``operationTimeout`` from now.
    var deadline: ContinuousClock.Instant {
        Self.callerDeadline ?? ContinuousClock.now + .milliseconds(Int64(operationTimeout * 1_000))
    }

    /// How often a transaction that PostgreSQL rolled back for a deadlock or a serialization failure runs again.
    static let transactionAttempts = 4

    /// One transaction. `durable: false` commits without waiting for the WAL flush (`SET LOCAL synchronous_commit
    /// = off`): for what may be lost in a crash without harm, a claim's leases (the escrows are simply due again).
    /// Every later durable commit flushes the WAL up to itself, so nothing committed after a lease can be kept while
    /// the lease is lost.
    func transaction<T: Sendable>(
        _ what: String,
        durable: Bool = true,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        guard !readOnly else { throw EscrowStoreError(.readOnly, "the store at \(place) is open read-only") }
        let logger = logger
        var attempt = 0
        // One bound for all the attempts.
        return try await Self.$callerDeadline.withValue(deadline) {
            while true {
                attempt += 1
                do {
                    return try await leased { connection in
                        try await connection.withTransaction(logger: logger) { connection in
                            if !durable {
                                try await connection.query("SET LOCAL synchronous_commit = off", logger: logger)
                            }
                            return try await body(connection)
                        }
                    }
                } catch {
                    if attempt < Self.transactionAttempts, Self.isRetryable(error) { continue }
                    throw failed(error, what)
                }
            }
        }
    }

    /// Rows of one statement, outside any transaction.
    func rows(_ what: String, _ query: PostgresQuery) async throws -> [PostgresRow] {
        try await withConnection(what) { [logger] connection in
            try await connection.query(query, logger: logger).collect()
        }
    }

    /// A pooled connection for `body`, with errors made PII-free.
    func withConnection<T: Sendable>(
        _ what: String,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        do { return try await leased(body) } catch { throw failed(error, what) }
    }

    /// The PII-free error of an operation that failed; when the host did not answer or took no write, the host pool
    /// looks for another host of a multi-host URL.
    private func failed(_ error: any Error, _ what: String) -> EscrowStoreError {
        let error = storeError(error, what)
        if error.code == .unavailable || error.code == .readOnly { hosts.operationFailed() }
        return error
    }

    /// Runs `body` on a pooled connection, waiting at most ``connectionWait`` for one: while the server is down
    /// or restarting the pool keeps reconnecting (with backoff), and an operation fails with `store_unavailable`
    /// (HTTP 503) rather than wait for it. Once leased, `body` runs to its end while the connection lives and the
    /// operation's ``deadline`` has not passed: a COMMIT is never abandoned while it can still answer in time. If
    /// the connection is lost under it, the operation fails with `store_unavailable` at most
    /// ``lostConnectionGrace`` later; if the deadline passes first (a silent network partition: no FIN, no RST,
    /// the socket looks alive), the connection is closed and the operation fails with `store_unavailable`, its
    /// outcome unknown (see ``untilLost(_:deadline:_:)``).
    private func leased<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let client = hosts.client
        let gotConnection = NIOLockedValueBox(false)
        let deadline = deadline
        let waitEnds = min(deadline, ContinuousClock.now + .milliseconds(Int64(connectionWait * 1_000)))
        guard ContinuousClock.now < deadline else { throw OperationTimedOut(leased: false) }
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                try await client.withConnection { connection in
                    gotConnection.withLockedValue { $0 = true }
                    return try await Self.untilLost(connection, deadline: deadline) { try await body(connection) }
                }
            }
            group.addTask {
                try await Task.sleep(until: waitEnds, clock: .continuous)
                guard gotConnection.withLockedValue({ $0 }) else {
                    if waitEnds < deadline { throw ConnectionWaitExpired() }
                    throw OperationTimedOut(leased: false)
                }
                return nil
            }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let result { return result }
            }
            throw ConnectionWaitExpired()
        }
    }

    /// How long an operation may still run once its connection is closed before it fails with `ConnectionLost`.
    static let lostConnectionGrace: Duration = .seconds(1)
    /// How often a running operation checks that its connection is still open and its deadline not past.
    static let connectionCheckInterval: Duration = .milliseconds(100)

    /// Runs `body` and returns what it returns, unless `connection` closes under it and `body` has not ended
    /// ``lostConnectionGrace`` later (then throws `ConnectionLost`), or `deadline` passes first (then closes the
    /// connection, so that the pool never lends it again, and throws `OperationTimedOut`); either way `body` is
    /// left behind.
    ///
    /// Written by hand because postgres-nio (1.33) loses a statement sent on a connection whose channel is already
    /// closed: `PostgresConnection.query` writes to the channel without a promise, so the write's failure is never
    /// reported and the statement's own promise is never completed. A transaction whose connection died between
    /// two statements (PostgreSQL stopped with `-m immediate`, a network cut) would wait forever in its next
    /// statement or its ROLLBACK, and with it the group commit and every capture behind it. And a connection whose
    /// packets are silently dropped never closes at all until the kernel gives up on it (many minutes): postgres-nio
    /// (1.33) sets no TCP keepalive or `TCP_USER_TIMEOUT` on the pool's sockets and offers no way to, so the deadline
    /// is what bounds an operation on it. The body runs in a task of its own so that it can be left behind: such a
    /// body never resumes, and its task holds only the closed connection.
    static func untilLost<T: Sendable>(
        _ connection: PostgresConnection,
        deadline: ContinuousClock.Instant,
        _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let outcome = ResumeOnce<T>()
        return try await withCheckedThrowingContinuation { continuation in
            outcome.set(continuation)
            let watchdog = Task {
                while !connection.isClosed {
                    if ContinuousClock.now >= deadline {
                        try? await connection.close()
                        outcome.resume(with: .failure(OperationTimedOut(leased: true)))
                        return
                    }
                    try await Task.sleep(for: connectionCheckInterval)
                }
                try await Task.sleep(for: lostConnectionGrace)
                outcome.resume(with: .failure(ConnectionLost()))
            }
            Task {
                let result: Result<T, any Error>
                do { result = .success(try await body()) } catch { result = .failure(error) }
                watchdog.cancel()
                outcome.resume(with: result)
            }
        }
    }

    /// A continuation resumed by whichever comes first, the body or the watchdog; later resumptions are dropped.
    private final class ResumeOnce<T: Sendable>: Sendable {
        private let continuation = NIOLockedValueBox<CheckedContinuation<T, any Error>?>(nil)

        func set(_ value: CheckedContinuation<T, any Error>) {
            continuation.withLockedValue { $0 = value }
        }

        func resume(with result: Result<T, any Error>) {
            let taken = continuation.withLockedValue { value -> CheckedContinuation<T, any Error>? in
                defer { value = nil }
                return value
            }
            taken?.resume(with: result)
        }
    }

    /// The connection closed under an operation that then did not end.
    struct ConnectionLost: Error {}

    struct ConnectionWaitExpired: Error {}

    /// The operation's deadline passed: before it had a connection (`leased: false`, nothing was sent), or while
    /// it ran (its last statement may or may not have taken effect).
    struct OperationTimedOut: Error {
        let leased: Bool
    }

    /// Only a statement that PostgreSQL rolled back as a whole, inside the transaction's body, runs again: a
    /// failed or interrupted COMMIT may have committed, and is never repeated.
    static func isRetryable(_ error: any Error) -> Bool {
        guard let transaction = error as? PostgresTransactionError, let failure = transaction.closureError,
            transaction.commitError == nil
        else { return false }
        let state = (failure as? PSQLError)?.serverInfo?[.sqlState]
        return state == "40P01" || state == "40001"
    }

    /// An error of the checks at open, before the pool exists.
    static func openError(_ error: any Error, place: String) -> EscrowStoreError {
        storeError(error, "cannot open the store", place: place)
    }

    func storeError(_ error: any Error, _ what: String) -> EscrowStoreError {
        Self.storeError(error, what, place: place)
    }

    /// Our own errors pass through; a malformed row is `malformed_row`; PostgreSQL's become `store_unavailable`
    /// (cannot connect, connection lost, server shutting down) or `store_failed`, with the SQLSTATE and the
    /// server's message only: never the query's arguments, the URL's password, or a row's content.
    static func storeError(_ error: any Error, _ what: String, place: String) -> EscrowStoreError {
        var error = error
        if let transaction = error as? PostgresTransactionError {
            error =
                transaction.closureError ?? transaction.commitError ?? transaction.beginError
                ?? transaction.rollbackError ?? error
        }
        if let error = error as? EscrowStoreError { return error }
        if let error = error as? MalformedRow {
            return EscrowStoreError(
                .malformedRow,
                "a stored escrow row is malformed (column \(error.column)); the replay worker moves it to dead"
            )
        }
        if let error = error as? PSQLError {
            if error.code == .server, let state = error.serverInfo?[.sqlState] {
                let message = error.serverInfo?[.message] ?? ""
                let text = "\(what) (PostgreSQL \(state): \(message))"
                switch state {
                case "25006": return EscrowStoreError(.readOnly, text)
                case _ where state.hasPrefix("08") || state.hasPrefix("57P") || state.hasPrefix("53"):
                    return EscrowStoreError(.unavailable, text)
                case "28P01", "28000", "3D000":
                    return EscrowStoreError(.unavailable, "cannot open \(place) (PostgreSQL \(state): \(message))")
                default: return EscrowStoreError(.failed, text)
                }
            }
            // The network error beneath (refused, reset, a TLS failure): it holds no query, argument or password.
            let beneath = error.underlying.map { ": \(String(describing: $0).prefix(200))" } ?? ""
            return EscrowStoreError(
                .unavailable,
                "\(what): cannot reach PostgreSQL at \(place) (\(error.code)\(beneath))"
            )
        }
        if error is ConnectionWaitExpired {
            return EscrowStoreError(
                .unavailable,
                "\(what): no connection to PostgreSQL at \(place) within the wait bound"
            )
        }
        if error is ConnectionLost {
            return EscrowStoreError(
                .unavailable,
                "\(what): the connection to PostgreSQL at \(place) was lost; whether the operation's last "
                    + "statement took effect is unknown"
            )
        }
        if let error = error as? OperationTimedOut {
            return EscrowStoreError(
                .unavailable,
                error.leased
                    ? "\(what): PostgreSQL at \(place) did not answer within the operation's bound; the connection "
                        + "was closed, and whether the operation's last statement took effect is unknown"
                    : "\(what): no connection to PostgreSQL at \(place) within the operation's bound"
            )
        }
        if error is CancellationError { return EscrowStoreError(.unavailable, "\(what): cancelled") }
        return EscrowStoreError(.failed, "\(what) (\(type(of: error)))")
    }
}
