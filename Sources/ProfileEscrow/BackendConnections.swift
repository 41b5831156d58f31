import EscrowCore
import Glibc
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// The backend's connections: HTTP/1.1 with keep-alive, over TLS for `https`, one exchange at a time on each.
///
/// A delivery takes the most recently used idle connection that is still open, or opens a new one; when its
/// exchange ended with the whole answer read and the backend keeping the connection, it gives it back. So at
/// most one connection per delivery in flight is open (the worker's concurrency), and under a steady load
/// every delivery finds one. A connection closed by either side (the backend's keep-alive timeout, ours of
/// ``BackendExchangeHandler/defaultIdleTimeout``, an error) leaves the pool as it closes.
final class BackendConnections: Sendable {
    /// Where the connections go.
    struct Endpoint: Sendable {
        var host: String
        var port: Int
        /// For `https`: certificates verified in full against the system's roots or the configured ones.
        var tls: NIOSSLContext?
        /// The name the certificate must carry, sent as SNI; nil for an IP address (then the certificate must
        /// carry that address, which NIOSSL checks against the peer's).
        var serverHostname: String?
    }

    /// One connection, and the handler that runs its exchanges (used on the connection's event loop only).
    struct Connection: Sendable {
        let channel: any Channel
        let handler: NIOLoopBound<BackendExchangeHandler>
        /// Whether an exchange used it before.
        var reused = false
    }

    private struct State {
        var idle: [Connection] = []
        var open: [ObjectIdentifier: any Channel] = [:]
        var shutDown = false
    }

    let endpoint: Endpoint
    private let idleTimeout: TimeAmount
    private let group: any EventLoopGroup
    private let state = NIOLockedValueBox(State())

    init(
        endpoint: Endpoint,
        idleTimeout: TimeAmount = BackendExchangeHandler.defaultIdleTimeout,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.endpoint = endpoint
        self.idleTimeout = idleTimeout
        self.group = group
    }

    /// How many open connections wait for the next exchange (for tests).
    var idleCount: Int { state.withLockedValue { $0.idle.count } }
    /// How many connections are open, idle or in use (for tests).
    var openCount: Int { state.withLockedValue { $0.open.count } }

    /// An open connection: an idle one, or a new one connected (and, for TLS, set up to handshake) before
    /// `deadline`, and at most 10 s after the call. Says whether the connection was used before.
    func take(before deadline: NIODeadline) async throws(BackendClient.Failure) -> Connection {
        while var idle = state.withLockedValue({ $0.idle.popLast() }) {
            idle.reused = true
            if idle.channel.isActive { return idle }
        }
        let remaining = deadline - .now()
        guard remaining > .zero else { throw .deadline }
        let endpoint = self.endpoint
        let idleTimeout = self.idleTimeout
        let made = NIOLockedValueBox<NIOLoopBound<BackendExchangeHandler>?>(nil)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: group)
                .connectTimeout(min(remaining, .seconds(10)))
                .channelOption(.tcpOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let pipeline = channel.pipeline.syncOperations
                        if let tls = endpoint.tls {
                            try pipeline.addHandler(
                                NIOSSLClientHandler(context: tls, serverHostname: endpoint.serverHostname)
                            )
                        }
                        // NIO's HTTP/1.1 codec; the decoder drops informational (1xx) answers.
                        try pipeline.addHandler(HTTPRequestEncoder())
                        let decoder = HTTPResponseDecoder(
                            leftOverBytesStrategy: .dropBytes,
                            informationalResponseStrategy: .drop
                        )
                        try pipeline.addHandler(ByteToMessageHandler(decoder))
                        let handler = BackendExchangeHandler(idleTimeout: idleTimeout)
                        try pipeline.addHandler(handler)
                        made.withLockedValue { $0 = NIOLoopBound(handler, eventLoop: channel.eventLoop) }
                    }
                }
                .connect(host: endpoint.host, port: endpoint.port)
                .get()
        } catch {
            throw .connect(String(describing: error), refused: Self.isRefused(error))
        }
        let id = ObjectIdentifier(channel)
        // The initializer ran before `connect` succeeded, so the handler is there.
        let handler = made.withLockedValue { $0 }
        let admitted = state.withLockedValue { state in
            guard !state.shutDown, handler != nil else { return false }
            state.open[id] = channel
            return true
        }
        guard admitted, let handler else {
            channel.close(promise: nil)
            throw .shuttingDown
        }
        channel.closeFuture.whenComplete { _ in
            self.state.withLockedValue { state in
                state.open[id] = nil
                state.idle.removeAll { $0.channel === channel }
            }
        }
        return Connection(channel: channel, handler: handler)
    }

    /// Gives a connection back after its exchange: kept for the next one when `reusable`, closed otherwise.
    func giveBack(_ connection: Connection, reusable: Bool) {
        let kept = state.withLockedValue { state in
            guard reusable, !state.shutDown, connection.channel.isActive else { return false }
            state.idle.append(connection)
            return true
        }
        if !kept { connection.channel.close(promise: nil) }
    }

    /// Closes every connection (an exchange still in flight ends as closed) and opens no more.
    func shutdown() async {
        let channels = state.withLockedValue { state in
            state.shutDown = true
            state.idle = []
            return Array(state.open.values)
        }
        for channel in channels {
            try? await channel.close()
        }
    }

    /// Whether nothing listened: NIO tries each resolved address in turn and reports every attempt's error.
    static func isRefused(_ error: any Error) -> Bool {
        if let error = error as? IOError { return error.errnoCode == ECONNREFUSED }
        guard let error = error as? NIOConnectionError, !error.connectionErrors.isEmpty else { return false }
        return error.connectionErrors.allSatisfy { isRefused($0.error) }
    }
}
