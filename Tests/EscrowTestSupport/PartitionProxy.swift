import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy on 127.0.0.1 that a test can cut off silently: while ``blackhole()`` holds, every connection stays
/// open and nothing passes either way (no FIN, no RST, no answer: a network partition as a node sees it), and new
/// connections are accepted and then hang the same way. ``heal()`` lets the bytes flow again, as a network does once
/// it is back (what was sent meanwhile arrives then).
///
/// Blocking sockets and one thread per direction: a test's handful of connections, nothing clever.
public final class PartitionProxy: Sendable {
    public let port: Int
    private let listener: Int32
    private let state: NIOLockedValueBox<State>
    /// True while bytes may flow (healed, or stopped): what a blackholed connection's threads wait on.
    private let flowing = ConditionLock(value: true)

    private struct State {
        var target: (host: String, port: Int)
        var blackholed = false
        var stopped = false
        var sockets: [Int32] = []
    }

    /// Listens on a free port of 127.0.0.1 and forwards to `host`:`port` (an IPv4 address).
    public init(to host: String, port targetPort: Int) throws {
        state = NIOLockedValueBox(State(target: (host, targetPort)))
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.address("127.0.0.1", 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0, listen(fd, 128) == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// From now on nothing passes, either way, on any connection.
    public func blackhole() {
        state.withLockedValue { $0.blackholed = true }
        setFlowing(false)
    }

    /// Bytes flow again.
    public func heal() {
        state.withLockedValue { $0.blackholed = false }
        setFlowing(true)
    }

    private func setFlowing(_ value: Bool) {
        flowing.lock()
        flowing.unlock(withValue: value)
    }

    /// New connections go to `port` from now on, and every open one is closed (RST), as a proxy that follows a
    /// failover does.
    public func retarget(to port: Int) {
        let sockets = state.withLockedValue { state -> [Int32] in
            state.target.port = port
            defer { state.sockets = [] }
            return state.sockets
        }
        for socket in sockets { shutdown(socket, Int32(SHUT_RDWR)) }
    }

    /// Closes the listener and every connection.
    public func stop() {
        let sockets = state.withLockedValue { state -> [Int32] in
            state.stopped = true
            defer { state.sockets = [] }
            return state.sockets
        }
        setFlowing(true)
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for socket in sockets { shutdown(socket, Int32(SHUT_RDWR)) }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if state.withLockedValue({ $0.stopped }) { return }
                continue
            }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            let target = state.withLockedValue { $0.target }
            var address = Self.address(target.host, target.port)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else {
                close(client)
                close(server)
                continue
            }
            state.withLockedValue { $0.sockets += [client, server] }
            Thread { [self] in pump(from: client, to: server) }.start()
            Thread { [self] in pump(from: server, to: client) }.start()
        }
    }

    /// Copies `from` to `to` until either ends; while blackholed, reads nothing (the bytes wait in the kernel).
    private func pump(from: Int32, to: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        defer {
            shutdown(to, Int32(SHUT_WR))
            shutdown(from, Int32(SHUT_RD))
        }
        while true {
            let (blackholed, stopped) = state.withLockedValue { ($0.blackholed, $0.stopped) }
            if stopped { return }
            if blackholed {
                // A network that forwards nothing while cut off: this thread waits until healed (or stopped).
                flowing.lock(whenValue: true)
                flowing.unlock()
                continue
            }
            // Wait for bytes at most 50 ms, so that a blackhole begins between two reads.
            var poller = pollfd(fd: from, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 50) > 0 else { continue }
            if state.withLockedValue({ $0.blackholed }) { continue }
            let count = buffer.withUnsafeMutableBytes { read(from, $0.baseAddress, $0.count) }
            if count <= 0 { return }
            var sent = 0
            while sent < count {
                let written = buffer.withUnsafeBytes { write(to, $0.baseAddress! + sent, count - sent) }
                if written <= 0 { return }
                sent += written
            }
        }
    }

    private static func address(_ host: String, _ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(host)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return address
    }
}
