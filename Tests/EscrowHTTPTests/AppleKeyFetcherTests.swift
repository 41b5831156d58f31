import AsyncHTTPClient
import EscrowCrypto
import EscrowTestSupport
import Foundation
import Logging
import NIOConcurrencyHelpers
import Testing

@testable import EscrowHTTP

/// Apple's keys fetched from a URL, against a real HTTP server on loopback: cached per `Cache-Control`, fetched
/// again on an unknown `kid` (rate-limited), the last good keys kept when a fetch fails, every fetch bounded.
@Suite("Apple's keys from a URL")
struct AppleKeyFetcherTests {
    static let keys = AppleTestKeys.shared

    /// The test JWKS with only the keys whose `kid` is in `kids`.
    static func jwks(_ kids: Set<String>) -> [UInt8] {
        let object = try! JSONSerialization.jsonObject(with: Data(keys.jwks)) as! [String: Any]
        let entries = (object["keys"] as! [[String: Any]]).filter { kids.contains($0["kid"] as! String) }
        return [UInt8](try! JSONSerialization.data(withJSONObject: ["keys": entries]))
    }

    static func token(ec: Bool = false) async throws -> String {
        try await keys.sign(AppleTestKeys.IdentityClaims(sub: "000000.keyfetch.0001"), ec: ec)
    }

    /// The fetcher's time, moved by the test instead of sleeping.
    final class ManualTime: Sendable {
        private let start = ContinuousClock.now
        private let offset = NIOLockedValueBox(Duration.zero)

        func now() -> ContinuousClock.Instant { start + offset.withLockedValue { $0 } }
        func advance(_ duration: Duration) { offset.withLockedValue { $0 += duration } }
    }

    /// Runs `body` with a fetcher of `server`'s `/auth/keys`, its client shut down after; on `time` when given.
    static func withFetcher(
        _ server: StaticHTTPServer,
        time: ManualTime? = nil,
        _ change: (inout AppleKeyFetcher.Configuration) -> Void = { _ in },
        _ body: (AppleKeyFetcher, AppleVerifier) async throws -> Void
    ) async throws {
        var configuration = AppleKeyFetcher.Configuration(url: URL(string: server.url("/auth/keys"))!)
        configuration.minimumInterval = .milliseconds(300)
        configuration.unknownKIDInterval = .milliseconds(300)
        configuration.lifetimeRange = 0...86_400
        change(&configuration)
        let client = AppleKeyFetcher.makeClient(logger: Logger(label: "test"))
        let now: @Sendable () -> ContinuousClock.Instant
        if let time { now = { time.now() } } else { now = { ContinuousClock.now } }
        let fetcher = AppleKeyFetcher(configuration, client: client, logger: Logger(label: "test"), now: now)
        let verifier = AppleVerifier(fetcher: fetcher, audiences: [AppleTestKeys.audience])
        do {
            try await body(fetcher, verifier)
        } catch {
            try await client.shutdown()
            await server.stop()
            throw error
        }
        try await client.shutdown()
        await server.stop()
    }

    static func verifies(_ verifier: AppleVerifier, _ token: String) async -> Bool {
        do {
            let _: AppleIdentityClaims = try await verifier.verifySignature(token)
            return true
        } catch {
            return false
        }
    }

    @Test("fetched once and cached while its max-age lasts; fetched again after it")
    func cachedPerMaxAge() async throws {
        let server = try await StaticHTTPServer.start(
            .init(headers: [("Cache-Control", "public, max-age=3")], body: Self.jwks([AppleTestKeys.rsaKid]))
        )
        let time = ManualTime()
        try await Self.withFetcher(server, time: time) { fetcher, verifier in
            let token = try await Self.token()
            // The fetcher's clock stands still while it verifies: one fetch, however many tokens.
            for _ in 0..<5 { #expect(await Self.verifies(verifier, token)) }
            #expect(server.requests.count == 1, "cached while max-age lasts")
            time.advance(.seconds(2))
            #expect(await Self.verifies(verifier, token))
            #expect(server.requests.count == 1, "2 s into a 3 s max-age: still cached")
            time.advance(.seconds(1))
            #expect(await Self.verifies(verifier, token))
            #expect(server.requests.count == 2, "fetched again once max-age passed")
            for _ in 0..<5 { #expect(await Self.verifies(verifier, token)) }
            #expect(server.requests.count == 2, "and cached again for the new max-age")
        }
    }

    @Test("a key rotated seconds after a fetch verifies within the short interval, not a minute later")
    func keyRotatedJustAfterAFetch() async throws {
        let server = try await StaticHTTPServer.start(
            .init(headers: [("Cache-Control", "max-age=3600")], body: Self.jwks([AppleTestKeys.rsaKid]))
        )
        let time = ManualTime()
        // The defaults: a minute between fetches for an expiry or a failure, 5 s for an unknown kid.
        let defaults: (inout AppleKeyFetcher.Configuration) -> Void = {
            $0.minimumInterval = .seconds(60)
            $0.unknownKIDInterval = AppleKeyFetcher.Configuration(url: $0.url).unknownKIDInterval
        }
        try await Self.withFetcher(server, time: time, defaults) { fetcher, verifier in
            #expect(fetcher.configuration.unknownKIDInterval == .seconds(5))
            #expect(await fetcher.refresh())
            // Apple rotates just after that fetch: the EC key appears.
            server.answer(
                .init(
                    headers: [("Cache-Control", "max-age=3600")],
                    body: Self.jwks([AppleTestKeys.rsaKid, AppleTestKeys.ecKid])
                )
            )
            let ecToken = try await Self.token(ec: true)
            time.advance(.seconds(1))
            #expect(!(await Self.verifies(verifier, ecToken)), "within the interval: no fetch yet")
            #expect(server.requests.count == 1)
            time.advance(.seconds(4))
            #expect(await Self.verifies(verifier, ecToken), "5 s after the fetch, the unknown kid fetched the new keys")
            #expect(server.requests.count == 2)
            #expect(await Self.verifies(verifier, try await Self.token()), "the RSA key still verifies, from cache")
            #expect(server.requests.count == 2)
        }
    }

    @Test("forged kids cannot flood Apple: one fetch per interval, and callers join the fetch under way")
    func unknownKIDRefetchRateLimited() async throws {
        let server = try await StaticHTTPServer.start(
            .init(headers: [("Cache-Control", "max-age=3600")], body: Self.jwks([AppleTestKeys.rsaKid]))
        )
        let time = ManualTime()
        let interval: (inout AppleKeyFetcher.Configuration) -> Void = {
            $0.minimumInterval = .seconds(60)
            $0.unknownKIDInterval = .seconds(5)
        }
        try await Self.withFetcher(server, time: time, interval) { fetcher, verifier in
            #expect(await fetcher.refresh())
            let forged = try Self.keys.forge(
                header: ["alg": "RS256", "kid": "forged-kid"],
                claims: AppleTestKeys.IdentityClaims(sub: "000000.keyfetch.0001")
            )
            // The clock stands still: 200 forged tokens, no fetch at all.
            for _ in 0..<200 { #expect(!(await Self.verifies(verifier, forged))) }
            #expect(server.requests.count == 1)
            // Once the interval passed: one fetch, however many tokens.
            time.advance(.seconds(5))
            for _ in 0..<200 { #expect(!(await Self.verifies(verifier, forged))) }
            #expect(server.requests.count == 2)
            // A slow answer: 50 tokens at once while it runs make one fetch, and each waits for it.
            server.answer(
                .init(headers: [("Cache-Control", "max-age=3600")], body: Self.jwks([AppleTestKeys.rsaKid]), delay: 1)
            )
            time.advance(.seconds(5))
            let refused = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<50 { group.addTask { !(await Self.verifies(verifier, forged)) } }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(refused == 50)
            #expect(server.requests.count == 3, "single flight: one fetch for 50 callers")
            #expect(await fetcher.fetches == 3)
        }
    }

    @Test("a failed fetch keeps the last good keys; an answer that is not a JWKS is not taken")
    func failureKeepsLastKeys() async throws {
        let server = try await StaticHTTPServer.start(
            .init(headers: [("Cache-Control", "max-age=0")], body: Self.jwks([AppleTestKeys.rsaKid]))
        )
        let time = ManualTime()
        try await Self.withFetcher(server, time: time) { fetcher, verifier in
            let token = try await Self.token()
            #expect(await Self.verifies(verifier, token))
            for broken in [
                StaticHTTPServer.Answer(status: 500, body: Array("down".utf8)),
                StaticHTTPServer.Answer(body: Array("{\"keys\":[]}".utf8)),
                StaticHTTPServer.Answer(body: Array("not json".utf8)),
                StaticHTTPServer.Answer(body: [UInt8](repeating: 0x20, count: 70_000) + Array("{}".utf8)),
            ] {
                server.answer(broken)
                let before = server.requests.count
                #expect(await Self.verifies(verifier, token), "within the minimum interval: no fetch")
                #expect(server.requests.count == before)
                time.advance(fetcher.configuration.minimumInterval)
                #expect(await Self.verifies(verifier, token), "the last good keys still verify")
                #expect(server.requests.count == before + 1, "expired: fetched again, and failed")
            }
        }
    }

    @Test("a fetch that does not answer is bounded; without keys every token is refused, and serve goes on")
    func boundedWithoutKeys() async throws {
        let server = try await StaticHTTPServer.start(
            .init(body: Self.jwks([AppleTestKeys.rsaKid]), delay: 60)
        )
        let quick: (inout AppleKeyFetcher.Configuration) -> Void = { $0.timeout = .milliseconds(500) }
        let time = ManualTime()
        try await Self.withFetcher(server, time: time, quick) { fetcher, verifier in
            let started = ContinuousClock.now
            #expect(!(await fetcher.refresh()), "no keys: the fetch timed out")
            // The server would answer after 60 s: an unbounded fetch waits that long. The timeout is 0.5 s; the whole
            // suite running beside it on 2 cores has stretched that to 5 s, so the bound is what tells the two apart.
            #expect(ContinuousClock.now - started < .seconds(30), "bounded by the timeout, far below the server's 60 s")
            let token = try await Self.token()
            #expect(!(await Self.verifies(verifier, token)))
            server.answer(.init(body: Self.jwks([AppleTestKeys.rsaKid])))
            time.advance(fetcher.configuration.minimumInterval)
            #expect(await Self.verifies(verifier, token), "the next fetch succeeds")
        }
    }

    @Test("base64url of token parts is decoded strictly: no padding, no other alphabet, no stray bits")
    func base64URLStrict() {
        #expect(Base64URL.decode("eyJhbGciOiJSUzI1NiJ9".utf8) == Array(#"{"alg":"RS256"}"#.utf8))
        #expect(Base64URL.decode("-_8".utf8) == [0xFB, 0xFF])
        #expect(Base64URL.decode("".utf8) == [])
        for bad in ["eyJ=", "+/8", "a", "abcde", "-_9", "ab c", "ab\u{0}", "AAAA-_8=", "AAAAé"] {
            #expect(Base64URL.decode(bad.utf8) == nil, "\(bad)")
        }
        // Every length, every byte value: the inverse of the encoder (Foundation's base64, mapped to base64url).
        for count in 0..<70 {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ count &* 11) }
            let encoded = Base64URL.encode(bytes)
            #expect(Base64URL.decode(encoded.utf8) == bytes, "\(count) bytes")
            #expect(Base64URL.decode(Array(encoded.utf8)[...]) == bytes, "\(count) bytes, a slice")
        }
    }

    @Test("Cache-Control: max-age, no-store and no-cache read; anything else is no max-age")
    func maxAgeParsing() {
        #expect(AppleKeyFetcher.maxAge("public, max-age=12345, must-revalidate") == 12345)
        #expect(AppleKeyFetcher.maxAge("MAX-AGE=\"60\"") == 60)
        #expect(AppleKeyFetcher.maxAge("no-store") == 0)
        #expect(AppleKeyFetcher.maxAge("max-age=60, no-cache") == 0)
        #expect(AppleKeyFetcher.maxAge("max-age=-1") == nil)
        #expect(AppleKeyFetcher.maxAge("private") == nil)
        #expect(AppleKeyFetcher.maxAge("=, ,=5,max-age") == nil, "malformed directives are skipped")
        #expect(AppleKeyFetcher.maxAge(nil) == nil)
    }
}
