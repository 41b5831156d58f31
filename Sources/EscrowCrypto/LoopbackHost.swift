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
        return IPAddress.parse(host).map(IPAddress.isLoopback) ?? false
    }

    /// The host of a plain `http://` URL whose host is not loopback; nil for `https` or a loopback host.
    package static func cleartextRemoteHost(of url: String) -> String? {
        guard url.lowercased().hasPrefix("http://") else { return nil }
        guard let host = host(of: url) else { return "(no host)" }
        return isLoopback(host) ? nil : host
    }
}
