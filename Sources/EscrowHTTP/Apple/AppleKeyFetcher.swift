public import AsyncHTTPClient
import EscrowCore
public import Foundation
public import Logging
import NIOCore
import NIOHTTP1

/// Apple's JWKS fetched from a URL (default `https://appleid.apple.com/auth/keys`) and cached as its
/// `Cache-Control: max-age` says; fetched again before its use once that has passed (at most once per
/// ``Configuration/minimumInterval``), and at once for a token whose `kid` it does not know (Apple rotates its keys):
/// such a fetch waits only for ``Configuration/unknownKIDInterval`` since the last one, so a key Apple published
/// seconds after a fetch verifies seconds later, not a minute later. Fetches are single-flight: a token arriving while
/// one runs waits for it (bounded by its timeout) rather than starting another, so a flood of forged `kid`s costs
/// Apple at most one request per ``Configuration/unknownKIDInterval``. A failed fetch keeps the last good keys (logged,
/// never thrown): until a first fetch succeeds, every token is refused as unverifiable and the next request tries
/// again, rate-limited the same way.
public actor AppleKeyFetcher {
    public struct Configuration: Sendable {
        public var url: URL
        /// One fetch, connection and body included.
        public var timeout: Duration = .seconds(10)
        /// The least time between two fetches asked for by an expiry or after a failure.
        public var minimumInterval: Duration = .seconds(60)
        /// The least time between two fetches when a token names a `kid` the keys held do not have (Apple rotated):
        /// short, so a new key is taken within seconds; single flight keeps a flood of forged `kid`s at one request
        /// per interval.
        public var unknownKIDInterval: Duration = .seconds(5)
        /// How long keys are kept without a `max-age`.
        public var defaultLifetime: Duration = .seconds(3600)
        /// The bounds any `max-age` is held to.
        public var lifetimeRange: ClosedRange<Double> = 60...86_400
        /// The largest JWKS document read (Apple's is under 2 KiB).
        public var maximumSize = 64 * 1024

        public init(url: URL) { self.url = url }
    }

    public static let appleURL = URL(string: "https://appleid.apple.com/auth/keys")!

    public nonisolated let configuration: Configuration
    let client: HTTPClient
    let logger: Logger
    /// The time intervals are measured in (tests move it instead of sleeping).
    let now: @Sendable () -> ContinuousClock.Instant
    private(set) var keys: AppleJWKS?
    private var expiresAt: ContinuousClock.Instant
    private var lastAttempt: ContinuousClock.Instant?
    private var inFlight: Task<Void, Never>?
    /// Fetches made (successful or not): for tests and logs.
    private(set) var fetches = 0

    /// A fetcher over `client` (the caller's: it shuts it down). Nothing is fetched before ``refresh()`` or the first
    /// token.
    public init(
        _ configuration: Configuration,
        client: HTTPClient,
        logger: Logger,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        self.configuration = configuration
        self.client = client
        self.logger = logger
        self.now = now
        self.expiresAt = now()
    }

    /// A client for the fetcher (and Apple's token and revoke endpoints): no redirect followed, bounded connect and
    /// read, and as many HTTP/1.1 connections to one host as the exchanger sends requests at once (HTTP/2, which
    /// Apple speaks, multiplexes them on one). The caller shuts it down.
    public static func makeClient(logger: Logger) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: HTTPClient.Configuration.Timeout(connect: .seconds(5), read: .seconds(10)),
            decompression: .disabled
        )
        configuration.connectionPool = HTTPClient.Configuration.ConnectionPool(
            idleTimeout: .seconds(60),
            concurrentHTTP1ConnectionsPerHostSoftLimit: AppleClaimLoop.concurrency
        )
        return HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup,
            configuration: configuration,
            backgroundActivityLogger: logger
        )
    }

    /// The keys for a token naming `kid`: fetched first when `kid` is not among them (once the last fetch is
    /// ``Configuration/unknownKIDInterval`` old), or when none are held or they are past their life (once it is
    /// ``Configuration/minimumInterval`` old). A fetch under way is joined, never doubled, by a token whose `kid` the
    /// keys held lack.
    func keys(forKID kid: String?) async -> AppleJWKS? {
        var unknown = kid.map { keys?.algorithms[$0] == nil } ?? false
        if unknown || keys == nil, let inFlight {
            // The fetch under way may bring this kid: wait for it (bounded by the fetch's timeout). Keys that are only
            // past their life still verify meanwhile: no wait for those.
            await inFlight.value
            unknown = kid.map { keys?.algorithms[$0] == nil } ?? false
        }
        let now = self.now()
        let interval: Duration? =
            unknown
            ? configuration.unknownKIDInterval
            : (keys == nil || now >= expiresAt) ? configuration.minimumInterval : nil
        if let interval, mayFetch(at: now, every: interval) {
            await refresh()
        }
        return keys
    }

    /// Fetches now (one fetch at a time: a caller arriving during one waits for it). Whether keys are held after it.
    @discardableResult
    public func refresh() async -> Bool {
        if let inFlight {
            await inFlight.value
            return keys != nil
        }
        lastAttempt = now()
        fetches += 1
        let task = Task { [configuration, client] in
            let result = await Self.fetch(configuration, client)
            self.apply(result)
        }
        inFlight = task
        await task.value
        inFlight = nil
        return keys != nil
    }

    private func mayFetch(at now: ContinuousClock.Instant, every interval: Duration) -> Bool {
        guard let lastAttempt else { return true }
        return now - lastAttempt >= interval
    }

    private func apply(_ result: Result<(AppleJWKS, Duration), FetchError>) {
        switch result {
        case .success(let (jwks, lifetime)):
            keys = jwks
            expiresAt = now() + lifetime
            logger.info(
                "fetched Apple's keys",
                metadata: [
                    "apple.jwks.url": "\(configuration.url.absoluteString)",
                    "apple.jwks.kids": "\(jwks.algorithms.keys.sorted().joined(separator: ","))",
                    "apple.jwks.lifetime_s": "\(lifetime.components.seconds)",
                ]
            )
        case .failure(let error):
            logger.error(
                "could not fetch Apple's keys; \(keys == nil ? "no token can be verified until a fetch succeeds" : "the last keys stay in use")",
                metadata: ["apple.jwks.url": "\(configuration.url.absoluteString)", "error": "\(error)"]
            )
        }
    }

    struct FetchError: Error, CustomStringConvertible {
        let description: String
    }

    /// One bounded GET: the keys and how long they may be kept.
    static func fetch(
        _ configuration: Configuration,
        _ client: HTTPClient
    ) async -> Result<(AppleJWKS, Duration), FetchError> {
        var request = HTTPClientRequest(url: configuration.url.absoluteString)
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(name: "User-Agent", value: "ProfileEscrow/1")
        let timeout = TimeAmount.nanoseconds(
            configuration.timeout.components.seconds * 1_000_000_000 + configuration.timeout.components.attoseconds
                / 1_000_000_000
        )
        do {
            let response = try await client.execute(request, timeout: timeout)
            guard response.status == .ok else {
                return .failure(FetchError(description: "the JWKS URL answered HTTP \(response.status.code)"))
            }
            let body = try await response.body.collect(upTo: configuration.maximumSize)
            let jwks = try await AppleJWKS(json: Array(buffer: body))
            let maxAge = maxAge(response.headers.first(name: "Cache-Control"))
            let seconds = min(
                max(maxAge ?? configuration.defaultLifetime.inSeconds, configuration.lifetimeRange.lowerBound),
                configuration.lifetimeRange.upperBound
            )
            return .success((jwks, .milliseconds(Int64(seconds * 1000))))
        } catch let error as AppleJWKS.LoadError {
            return .failure(FetchError(description: error.description))
        } catch let error as NIOTooManyBytesError {
            _ = error
            return .failure(FetchError(description: "the JWKS is larger than \(configuration.maximumSize) bytes"))
        } catch {
            return .failure(FetchError(description: "the JWKS URL could not be read (\(error))"))
        }
    }

    /// `max-age` of a `Cache-Control` header in seconds; 0 for `no-store` or `no-cache`; nil without either.
    static func maxAge(_ header: String?) -> Double? {
        guard let header else { return nil }
        var result: Double?
        for directive in header.split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = parts[0].trimmingSpaces().lowercased()
            if name == "no-store" || name == "no-cache" { return 0 }
            let quotes = CharacterSet(charactersIn: "\"")
            if name == "max-age", parts.count == 2,
                let seconds = Double(parts[1].trimmingSpaces().trimmingCharacters(in: quotes)), seconds.isFinite,
                seconds >= 0
            {
                result = seconds
            }
        }
        return result
    }
}
