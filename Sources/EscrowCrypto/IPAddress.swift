#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// IPv4 and IPv6 addresses as bytes, with the C library's parser (NIO parses one only into a socket address): for a
/// custody engine's loopback check (``LoopbackHost``) and the HTTP service's per-client limits and trusted proxies.
package enum IPAddress {
    /// 4 bytes for IPv4 (also for an IPv4-mapped IPv6 address, `::ffff:a.b.c.d`), 16 for IPv6; nil for anything else.
    package static func parse(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF { return Array(bytes[12...]) }
        return bytes
    }

    /// Whether `bytes` (as ``parse(_:)`` gives them) is a loopback address: 127.0.0.0/8 or `::1`.
    package static func isLoopback(_ bytes: [UInt8]) -> Bool {
        bytes.count == 4 ? bytes[0] == 127 : bytes == Array(repeating: 0, count: 15) + [1]
    }
}
