#if canImport(Glibc)
import Glibc
#endif

/// A port of 127.0.0.1 nothing listens on now (bound to 0, read back, given back), for a process that
/// must be told its port before it starts.
public func freePort() throws -> Int {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    try withUnsafeMutablePointer(to: &address) { pointer in
        try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
            guard bind(descriptor, raw, length) == 0, getsockname(descriptor, raw, &length) == 0 else {
                throw FreePortUnavailable()
            }
        }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// No port could be bound.
public struct FreePortUnavailable: Error {}
