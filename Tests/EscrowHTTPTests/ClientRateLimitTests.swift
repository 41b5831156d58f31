import EscrowCrypto
import EscrowTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@testable import EscrowHTTP

@Suite("Per-client limits: who the client is")
struct ClientAddressTests {
    static func peer(_ text: String) throws -> SocketAddress { try SocketAddress(ipAddress: text, port: 40_000) }

    @Test("the peer is the client when it is no trusted proxy, whatever X-Forwarded-For says")
    func untrustedPeer() throws {
        let trusted = try TrustedProxies(["10.0.0.0/8"])
        #expect(
            ClientAddress.key(peer: try Self.peer("192.0.2.7"), forwardedFor: ["198.51.100.1"], trusted: trusted)
                == "192.0.2.7"
        )
        #expect(
            ClientAddress.key(peer: try Self.peer("192.0.2.7"), forwardedFor: [], trusted: TrustedProxies())
                == "192.0.2.7"
        )
        #expect(ClientAddress.key(peer: nil, forwardedFor: ["198.51.100.1"], trusted: trusted) == "local")
    }

    @Test("behind trusted proxies: the rightmost address that is not a trusted proxy; the client's own words never")
    func trustedChain() throws {
        let trusted = try TrustedProxies(["10.0.0.0/8", "2001:db8:ffff::/48"])
        let peer = try Self.peer("10.1.2.3")
        // The client wrote 203.0.113.9 itself; the outer proxy saw 198.51.100.1; an inner proxy 10.9.9.9 passed it on.
        #expect(
            ClientAddress.key(peer: peer, forwardedFor: ["203.0.113.9, 198.51.100.1", "10.9.9.9"], trusted: trusted)
                == "198.51.100.1"
        )
        #expect(ClientAddress.key(peer: peer, forwardedFor: [], trusted: trusted) == "10.1.2.3", "no header: the proxy")
        #expect(
            ClientAddress.key(peer: peer, forwardedFor: ["10.2.2.2"], trusted: trusted) == "10.2.2.2",
            "every entry trusted: the leftmost"
        )
        #expect(
            ClientAddress.key(peer: peer, forwardedFor: ["not-an-address, 10.2.2.2"], trusted: trusted) == "10.1.2.3",
            "an entry that is no address: the proxy counts"
        )
        #expect(
            ClientAddress.key(peer: peer, forwardedFor: ["2001:db8:1:2:aaaa::1"], trusted: trusted)
                == "2001:0db8:0001:0002::/64",
            "IPv6 by its /64"
        )
        #expect(
            ClientAddress.key(peer: try Self.peer("::ffff:192.0.2.1"), forwardedFor: [], trusted: trusted)
                == "192.0.2.1"
        )
    }

    @Test(
        "networks: prefixes match on bits; a malformed entry is refused by name",
        arguments: ["10.0.0.0/33", "10.0.0", "fe80::/129", "x"]
    )
    func networks(_ malformed: String) throws {
        let trusted = try TrustedProxies(["192.0.2.128/25", "2001:db8::/32", "203.0.113.5"])
        #expect(trusted.contains(IPAddress.parse("192.0.2.200")!))
        #expect(!trusted.contains(IPAddress.parse("192.0.2.127")!))
        #expect(trusted.contains(IPAddress.parse("2001:db8:abcd::1")!))
        #expect(!trusted.contains(IPAddress.parse("2001:db9::1")!))
        #expect(trusted.contains(IPAddress.parse("203.0.113.5")!) && !trusted.contains(IPAddress.parse("203.0.113.6")!))
        #expect(throws: TrustedProxyError.self) { try TrustedProxies([malformed]) }
        do {
            _ = try TrustedProxies([malformed])
        } catch {
            #expect(error.description.contains(malformed))
        }
    }

    @Test("the per-client buckets are bounded: past the capacity, a new client waits until buckets refill")
    func bounded() {
        let limiter = RateLimiter(limit: RateLimit(requestsPerSecond: 1, burst: 2), capacity: 3)
        let start = ContinuousClock.now
        for client in ["a", "b", "c"] { #expect(limiter.acquire(client, now: start) == nil) }
        #expect(limiter.acquire("d", now: start) != nil, "full: a new key is refused")
        #expect(limiter.count == 3)
        // Two seconds later every bucket has refilled: they leave, and the new key fits.
        #expect(limiter.acquire("d", now: start + .seconds(2)) == nil)
        #expect(limiter.count == 1)
    }
}

@Suite("Per-client limits on a real listener: one client cannot starve another")
struct ClientRateLimitLiveTests {
    @Test("a flood from 127.0.0.1 is refused while 127.0.0.2 signs in, and probes always answer")
    func floodFromOneAddress() async throws {
        var flow = try await SignInFlow()
        // No refill to speak of: however slowly a loaded machine sends them, the client has its burst and no more.
        flow.harness.configuration.anonymousRateLimit = RateLimit(requestsPerSecond: 0.001, burst: 20)
        flow.harness.configuration.anonymousOverallRateLimit = RateLimit(requestsPerSecond: 1_000, burst: 1_000)
        let app = flow.harness.app()
        try await app.test(.live) { client async throws in
            let port = try #require(client.port)
            var flooded: [Int] = []
            for _ in 0..<60 {
                let answer = try await LoopbackClient.request(
                    "GET",
                    "/v1/apple/signin?return=app",
                    port: port,
                    from: "127.0.0.1"
                )
                flooded.append(answer.status)
            }
            #expect(flooded.prefix(20).allSatisfy { $0 == 302 }, "the flooding client gets its burst")
            #expect(flooded.dropFirst(20).allSatisfy { $0 == 429 }, "then 429")
            let other = try await LoopbackClient.request(
                "GET",
                "/v1/apple/signin?return=app",
                port: port,
                from: "127.0.0.2"
            )
            #expect(other.status == 302, "another address still starts its sign-in")
            #expect(other.header("Set-Cookie")?.hasPrefix(AppleSignInRoutes.cookiePrefix) == true)
            for path in ["/healthz", "/readyz"] {
                let probe = try await LoopbackClient.request("GET", path, port: port, from: "127.0.0.1")
                #expect(probe.status == 200, "\(path) is never limited, even for the flooding address")
            }
            // Callbacks flooded from one address are refused before their body is read: 429, no retry page with the
            // fields; another address's callback is still read (an unknown state here: its 400 page).
            func callback(from source: String) async throws -> LoopbackClient.Answer {
                try await LoopbackClient.request(
                    "POST",
                    "/v1/apple/signin/callback",
                    port: port,
                    from: source,
                    headers: [("Content-Type", "application/x-www-form-urlencoded")],
                    body: Array("state=unknown&user=%7B%7D".utf8)
                )
            }
            var callbacks: [Int] = []
            for _ in 0..<30 { callbacks.append(try await callback(from: "127.0.0.1").status) }
            #expect(callbacks.prefix(20).allSatisfy { $0 == 400 } && callbacks.suffix(5).allSatisfy { $0 == 429 })
            let refused = try await callback(from: "127.0.0.1")
            #expect(refused.status == 429)
            #expect(refused.header("Retry-After") != nil)
            #expect(try await callback(from: "127.0.0.2").status == 400, "read for another address")
            #expect(!refused.body.contains("type=\"hidden\""))
        }
    }

    @Test("behind a trusted proxy, clients are told apart by X-Forwarded-For")
    func trustedProxy() async throws {
        var flow = try await SignInFlow()
        flow.harness.configuration.anonymousRateLimit = RateLimit(requestsPerSecond: 0.001, burst: 2)
        flow.harness.configuration.trustedProxies = try TrustedProxies(["127.0.0.1"])
        let app = flow.harness.app()
        try await app.test(.live) { client async throws in
            let port = try #require(client.port)
            func start(_ forwarded: String, from source: String = "127.0.0.1") async throws -> Int {
                try await LoopbackClient.request(
                    "GET",
                    "/v1/apple/signin?return=app",
                    port: port,
                    from: source,
                    headers: [("X-Forwarded-For", forwarded)]
                ).status
            }
            #expect(try await start("198.51.100.1") == 302)
            #expect(try await start("198.51.100.1") == 302)
            #expect(try await start("198.51.100.1") == 429, "that client is over its burst")
            #expect(try await start("198.51.100.2") == 302, "another client behind the same proxy is not")
            // Spoofing: a client that is not a trusted proxy cannot pick its own key.
            #expect(try await start("198.51.100.3", from: "127.0.0.2") == 302)
            #expect(try await start("198.51.100.4", from: "127.0.0.2") == 302)
            #expect(try await start("198.51.100.5", from: "127.0.0.2") == 429, "counted as 127.0.0.2")
        }
    }
}
