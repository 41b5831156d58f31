import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy on 127.0.0.1 that can lose one answer on the way back: after ``dropNextAnswer()``, the next bytes the
/// server sends are kept here (``dropped``) instead of forwarded, and that connection is closed, as a phone losing its
/// network just after the request went out. The server did its work; the app never heard.
///
/// Blocking sockets and one thread per direction: a test's few connections, nothing clever.
final class AnswerDroppingProxy: Sendable {
    let port: Int
    private let listener: Int32
    private let targetPort: Int
    private let state = NIOLockedValueBox((dropNext: false, dropped: [Data](), stopped: false))

    init(to targetPort: Int) throws {
        self.targetPort = targetPort
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && listen(descriptor, 16) == 0
                    && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard bound else {
            close(descriptor)
            throw POSIXError(.EADDRNOTAVAIL)
        }
        listener = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread { [self] in acceptLoop() }.start()
    }

    /// The next answer is lost.
    func dropNextAnswer() { state.withLockedValue { $0.dropNext = true } }

    /// The answers lost so far, as the server sent them.
    var dropped: [Data] { state.withLockedValue { $0.dropped } }

    func stop() {
        state.withLockedValue { $0.stopped = true }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if state.withLockedValue({ $0.stopped }) { return }
                continue
            }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: targetPort)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
            guard connected else {
                close(client)
                close(server)
                continue
            }
            Thread { Self.pump(from: client, to: server) }.start()
            Thread { [self] in answers(from: server, to: client) }.start()
        }
    }

    /// Forwards the server's bytes, except an answer to be lost: read whole (until the server is quiet for 300 ms),
    /// kept, and both ends closed.
    private func answers(from server: Int32, to client: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(server, &buffer, buffer.count)
            guard count > 0 else { break }
            let drop = state.withLockedValue { state in
                defer { state.dropNext = false }
                return state.dropNext
            }
            guard drop else {
                guard Self.writeAll(buffer[0..<count], to: client) else { break }
                continue
            }
            var answer = Data(buffer[0..<count])
            var poller = pollfd(fd: server, events: Int16(POLLIN), revents: 0)
            while poll(&poller, 1, 300) > 0 {
                let more = read(server, &buffer, buffer.count)
                guard more > 0 else { break }
                answer.append(contentsOf: buffer[0..<more])
            }
            state.withLockedValue { $0.dropped.append(answer) }
            break
        }
        shutdown(client, Int32(SHUT_RDWR))
        shutdown(server, Int32(SHUT_RDWR))
    }

    private static func pump(from: Int32, to: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(from, &buffer, buffer.count)
            guard count > 0, writeAll(buffer[0..<count], to: to) else { break }
        }
        shutdown(to, Int32(SHUT_WR))
    }

    private static func writeAll(_ bytes: ArraySlice<UInt8>, to descriptor: Int32) -> Bool {
        var sent = bytes.startIndex
        while sent < bytes.endIndex {
            let written = bytes[sent...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            guard written > 0 else { return false }
            sent += written
        }
        return true
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return address
    }
}
