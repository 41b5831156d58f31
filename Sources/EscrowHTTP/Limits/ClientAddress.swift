import EscrowCrypto
import Hummingbird
import NIOCore

// Unused here since the address parsing moved to EscrowCrypto's `IPAddress`, but the socket tests of EscrowHTTPTests
// see `sockaddr_in` as Glibc's through this module's import (with MemberImportVisibility, without it they find
// CNIOLinux's and fail to build).
#if canImport(Glibc)
import Glibc
#endif

/// Who a token-less request comes from, for its per-client rate limit: the connection's peer, or, when the peer is a
/// configured trusted proxy, the address that proxy saw (the rightmost `X-Forwarded-For` entry that is not itself a
/// trusted proxy: entries left of it are the client's own words).
///
/// IPv6 clients count by their /64 (one subscriber's usual allocation), so that one host cannot step around its limit
/// by changing its interface identifier; an IPv4-mapped IPv6 address counts as its IPv4 address.
enum ClientAddress {
    /// An IPv4 address whole, an IPv6 address by its /64.
    static func limitKey(_ bytes: [UInt8]) -> String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        let hex = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for (offset, byte) in bytes.prefix(8).enumerated() {
            if offset > 0, offset % 2 == 0 { text.append(UInt8(ascii: ":")) }
            text += [hex[Int(byte >> 4)], hex[Int(byte & 15)]]
        }
        return String(decoding: text, as: UTF8.self) + "::/64"
    }

    /// The rate-limit key of a request whose peer is `peer` (nil in an in-process test router: `"local"`).
    static func key(peer: SocketAddress?, forwardedFor: [String], trusted: TrustedProxies) -> String {
        guard let peerText = peer?.ipAddress, let peerBytes = IPAddress.parse(peerText) else { return "local" }
        guard !trusted.isEmpty, trusted.contains(peerBytes) else { return ClientAddress.limitKey(peerBytes) }
        let entries = forwardedFor.flatMap { $0.split(separator: ",") }.map { $0.trimmingSpaces() }
        var leftmost: [UInt8]?
        for entry in entries.reversed() {
            // An entry that is no address ends the walk: what the proxy saw cannot be read, so the proxy is the client.
            guard let bytes = IPAddress.parse(String(entry)) else { return ClientAddress.limitKey(peerBytes) }
            guard trusted.contains(bytes) else { return ClientAddress.limitKey(bytes) }
            leftmost = bytes
        }
        return ClientAddress.limitKey(leftmost ?? peerBytes)
    }
}

/// The networks whose connections may say who the client is (`--trusted-proxy`, CIDR or a single address).
public struct TrustedProxies: Sendable, Equatable {
    struct Network: Sendable, Equatable {
        let address: [UInt8]
        let prefixLength: Int

        func contains(_ bytes: [UInt8]) -> Bool {
            guard bytes.count == address.count else { return false }
            var remaining = prefixLength
            for (given, network) in zip(bytes, address) where remaining > 0 {
                let bits = min(8, remaining)
                let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
                guard given & mask == network & mask else { return false }
                remaining -= bits
            }
            return true
        }
    }

    let networks: [Network]

    public init() { networks = [] }

    /// Parses `10.0.0.0/8`, `2001:db8::/32` or a single address; throws naming the entry that is neither.
    public init(_ entries: [String]) throws(TrustedProxyError) {
        networks = try entries.map { entry throws(TrustedProxyError) in
            let parts = entry.split(separator: "/", maxSplits: 1)
            guard let first = parts.first, let address = IPAddress.parse(String(first)) else {
                throw TrustedProxyError(entry: entry)
            }
            let maximum = address.count * 8
            let length = parts.count == 2 ? Int(parts[1]) : maximum
            guard let length, (0...maximum).contains(length) else { throw TrustedProxyError(entry: entry) }
            return Network(address: address, prefixLength: length)
        }
    }

    var isEmpty: Bool { networks.isEmpty }

    func contains(_ bytes: [UInt8]) -> Bool { networks.contains { $0.contains(bytes) } }
}

/// A `--trusted-proxy` entry that is not an address or a network in CIDR notation.
public struct TrustedProxyError: Error, CustomStringConvertible {
    public let entry: String
    public var description: String { "not an IP address or CIDR network: \(entry)" }
}
