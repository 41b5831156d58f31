import EscrowTestSupport
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

@testable import EscrowHTTP

#if canImport(Glibc)
import Glibc
#endif

/// Slow and idle clients against a real loopback server: closed at their deadlines.
@Suite("Connection deadlines")
struct ConnectionDeadlineTests {
    func harness() async throws -> HTTPHarness {
        var harness = try await HTTPHarness()
        harness.configuration.requestHeadTimeout = .seconds(1)
        harness.configuration.requestBodyTimeout = .seconds(1)
        return harness
    }

    @Test("a body dribbled one byte at a time is cut off at the total body deadline")
    func slowBody() async throws {
        try await harness().app().test(.live) { client async throws in
            let socket = try RawSocket(port: try #require(client.port))
            socket.send("POST /v1/apple/notifications HTTP/1.1\r\nHost: test\r\n")
            socket.send("Content-Type: application/json\r\nContent-Length: 200\r\n\r\n")
            let start = ContinuousClock.now
            // One byte every 200 ms of real time (the server's deadline is a real timer on a real socket): an idle
            // timer restarted by each byte would never fire.
            var closed = false
            for _ in 0..<100 where !closed {
                try await pause(for: .milliseconds(200))
                closed = !socket.send("{") || socket.isClosed(waiting: .milliseconds(1))
            }
            let elapsed = ContinuousClock.now - start
            #expect(closed, "the connection was closed")
            // Bytes keep coming for up to 20 s: a timer restarted by each of them would never close the connection.
            // Far below that, with room for a loaded machine, where other tests can hold up this one's task.
            #expect(elapsed < .seconds(12), "within the 1 s body deadline (plus a loaded machine's lag)")
        }
    }

    @Test("headers dribbled one byte at a time are cut off at the head deadline")
    func slowHeaders() async throws {
        try await harness().app().test(.live) { client async throws in
            let socket = try RawSocket(port: try #require(client.port))
            socket.send("GET /healthz HTTP/1.1\r\n")
            let start = ContinuousClock.now
            var closed = false
            for _ in 0..<100 where !closed {
                try await pause(for: .milliseconds(200))  // one byte every 200 ms of real time, as above
                closed = !socket.send("X") || socket.isClosed(waiting: .milliseconds(1))
            }
            #expect(closed)
            #expect(ContinuousClock.now - start < .seconds(12), "within the 1 s head deadline, not never")
        }
    }

    @Test("200 idle connections do not stay open")
    func idleConnections() async throws {
        try await harness().app().test(.live) { client async throws in
            let port = try #require(client.port)
            let sockets = try (0..<200).map { _ in try RawSocket(port: port) }
            // One of them finishes a request first: a kept-alive connection is idle too.
            sockets[0].send("GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
            // The deadline is 1 s; a loaded machine may close the last of 200 later, never by itself without one.
            try await eventually("200 idle connections closed", within: 10, every: .milliseconds(250)) {
                sockets.allSatisfy { $0.isClosed(waiting: .milliseconds(1)) }
            }
        }
    }

    @Test("Transfer-Encoding: xchunked and a malformed request line: 400 with a problem+json body")
    func malformed() async throws {
        // The default deadlines: under a loaded machine a 1 s head deadline could close the connection first.
        try await HTTPHarness().app().test(.live) { client async throws in
            let port = try #require(client.port)
            for request in [
                "POST /v1/apple/notifications HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                    + "Transfer-Encoding: xchunked\r\n\r\n{}",
                "GARBAGE\u{1}REQUEST\r\n\r\n",
            ] {
                let socket = try RawSocket(port: port)
                socket.send(request)
                let answer = socket.readAll(timeout: .seconds(15))
                #expect(answer.hasPrefix("HTTP/1.1 400"), "\(answer.prefix(40))")
                #expect(answer.lowercased().contains("content-type: application/problem+json"))
                #expect(answer.contains("\"code\":\""))
            }
        }
    }
}

/// A blocking loopback TCP socket, for clients that misbehave on purpose.
final class RawSocket: @unchecked Sendable {
    let descriptor: Int32

    init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else { throw POSIXError(.ECONNREFUSED) }
    }

    deinit { close(descriptor) }

    /// Whether the write went through (false once the server has closed and reset the connection).
    @discardableResult
    func send(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            == bytes.count
    }

    /// Whether the server has closed the connection (end of stream or an error) within `waiting`; what it
    /// sent before (a response) is read and dropped.
    func isClosed(waiting: Duration) -> Bool {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(
            waiting.components.seconds * 1000 + waiting.components.attoseconds / 1_000_000_000_000_000
        )
        guard poll(&poller, 1, milliseconds) > 0 else { return false }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes {
                recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
            }
            if count == 0 { return true }
            if count < 0 { return errno != EAGAIN && errno != EWOULDBLOCK }
        }
    }

    /// Everything the server sends until it closes or `timeout` passes.
    func readAll(timeout: Duration) -> String {
        var received: [UInt8] = []
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 4096)
        while ContinuousClock.now < deadline {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            received += buffer[0..<count]
        }
        return String(decoding: received, as: UTF8.self)
    }
}
