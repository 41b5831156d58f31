#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// Whether a URL's host is this machine's loopback interface, where plain `http` never leaves the host: `localhost`,
/// an IPv4 address in 127.0.0.0/8, `::1` (or an IPv4-mapped loopback address). A name other than `localhost` is never
/// loopback here: it could resolve anywhere.
package enum LoopbackHost {
    /// The host of `url` (`scheme://[userinfo@]host[:port][/path]`), lowercased, without an IPv6 literal's
    /// brackets; nil when the URL has no `://` or an empty host.
    package static func host(of url: String) -> String? {
        guard let separator = url.firstRange(of: "://") else { return nil }
        var authority = Substring(url[separator.upperBound...])
        if let end = authority.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
            authority = authority[..<end]
        }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        let host: Substring
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
        } else {
            host = authority.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        }
        return host.isEmpty ? nil : host.lowercased()
    }

    /// Whether `host` (as ``host(of:)`` returns it) is loopback.
    package static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "localhost." { return true }
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            return UInt32(bigEndian: v4.s_addr) >> 24 == 127
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, host, &v6) == 1 else { return false }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }  // ::1
        // ::ffff:127.x.y.z
        return bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF && bytes[12] == 127
    }

    /// The host of a plain `http://` URL whose host is not loopback; nil for `https` or a loopback host.
    package static func cleartextRemoteHost(of url: String) -> String? {
        guard url.lowercased().hasPrefix("http://") else { return nil }
        guard let host = host(of: url) else { return "(no host)" }
        return isLoopback(host) ? nil : host
    }
}
