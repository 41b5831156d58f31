import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One HTTP/1.1 request from a chosen loopback address (`127.0.0.2` is a second client on the same machine: the whole
/// of 127/8 is loopback), on a connection of its own, for tests of what a server decides by its peer's address.
/// Blocking sockets on a thread of their own, each wait bounded by `timeout`.
public enum LoopbackClient {
    public struct Answer: Sendable {
        public let status: Int
        public let head: String
        public let body: String

        /// The first value of header `name` (ASCII case-insensitive).
        public func header(_ name: String) -> String? {
            for line in head.split(separator: "\r\n").dropFirst() {
                let parts = line.split(separator: ":", maxSplits: 1)
                if parts.count == 2, parts[0].lowercased() == name.lowercased() {
                    return parts[1].trimmingCharacters(in: .whitespaces)
                }
            }
            return nil
        }
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Sends `method path` with `headers` and `body` to 127.0.0.1:`port` from `source`, and reads the whole answer
    /// (the server closes: `Connection: close`).
    public static func request(
        _ method: String,
        _ path: String,
        port: Int,
        from source: String,
        headers: [(String, String)] = [],
        body: [UInt8] = [],
        timeout: Duration = .seconds(10)
    ) async throws -> Answer {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(
                    with: Result {
                        try exchange(method, path, port, source, headers, body, timeout)
                    }
                )
            }
            thread.start()
        }
    }

    private static func exchange(
        _ method: String,
        _ path: String,
        _ port: Int,
        _ source: String,
        _ headers: [(String, String)],
        _ body: [UInt8],
        _ timeout: Duration
    ) throws -> Answer {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        defer { close(descriptor) }
        var limit = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = in_port_t(UInt16(port).bigEndian)
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        let size = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, size) }
        }
        guard bound == 0 else { throw Failure(description: "bind to \(source): errno \(errno)") }
        let connected = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, size) }
        }
        guard connected == 0 else { throw Failure(description: "connect to port \(port): errno \(errno)") }
        var request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        if !body.isEmpty || method == "POST" { request += "Content-Length: \(body.count)\r\n" }
        let bytes = Array((request + "\r\n").utf8) + body
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes {
                send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard count > 0 else { throw Failure(description: "send: errno \(errno)") }
            sent += count
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count == 0 { break }
            guard count > 0 else { throw Failure(description: "no complete answer within \(timeout)") }
            received += buffer[..<count]
        }
        let text = String(decoding: received, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { throw Failure(description: "no HTTP answer") }
        let head = String(text[..<split.lowerBound])
        let statusText = head.split(separator: " ", maxSplits: 2).dropFirst().first.map(String.init) ?? ""
        guard let status = Int(statusText) else { throw Failure(description: "no status line") }
        return Answer(status: status, head: head, body: String(text[split.upperBound...]))
    }
}
