public import AsyncHTTPClient
public import EscrowCore
import EscrowCrypto
import Foundation
public import Logging
public import Metrics
import NIOCore
import NIOHTTP1
public import ProfileEscrow
public import ServiceLifecycle

/// Redeems the authorization codes that sign-ins captured here at Apple's token endpoint, within their five minutes:
/// claims due exchanges from the store with a lease (any node, one at a time per code), posts
/// `grant_type=authorization_code` with a fresh client secret, checks the answer's id_token (Apple's signature, the
/// client id as audience, the escrow's user as `sub`), and seals the refresh token into the escrow; Apple's refusal
/// is kept as its error code. Unanswered exchanges are retried with backoff until the code expires.
///
/// The code, the client secret and Apple's tokens are never logged, counted or put in an error: only the escrow's id,
/// the attempt and the outcome's code.
public final class AppleTokenExchanger: Service, Sendable {
    public struct Configuration: Sendable {
        /// Apple's token endpoint (`--apple-token-url`).
        public var tokenURL: String
        /// The longest wait for Apple's answer (seconds).
        public var timeout: Double = 10
        /// The longest wait between two attempts at one code (seconds): the code lives five minutes.
        public var maximumBackoff: Double = 20
        /// How often the store is asked for due exchanges when none were due (seconds).
        public var poll: Double = 0.5

        public init(tokenURL: String = "https://appleid.apple.com/auth/token") {
            self.tokenURL = tokenURL
        }

        /// Exchanges claimed at once, and sent at once: Apple answers in a few hundred milliseconds, so one at a time
        /// a node would redeem a handful of codes a second, and a burst of sign-ins would outlive its codes.
        static let batch = AppleClaimLoop.concurrency

        /// A claim's lease: the batch's exchanges run side by side, each at most a timeout, with a margin for the
        /// store's reads and writes around them.
        var lease: Double { timeout + 12 }

        /// When an unanswered exchange is tried again: doubling from a second, at most ``maximumBackoff``, with full
        /// jitter above half, never past the code's expiry (where it ends as timed out).
        func retry(after attempts: Int, now: Date, expiresAt: Date) -> Date {
            let doubling = RetryPolicy(base: 1, cap: maximumBackoff).ceiling(afterAttempt: attempts)
            return min(expiresAt, now.addingTimeInterval(doubling * Double.random(in: 0.5...1)))
        }
    }

    public let configuration: Configuration
    let store: any AppleTokenStore
    let escrow: Escrow
    let verifier: AppleVerifier
    /// A client secret (the JWT) for a client id: minted by `AppleClientSecrets`, cached an hour; each try recorded
    /// in ``signing``.
    let clientSecret: @Sendable (String) async throws -> String
    /// Whether the last client secret could be signed (shared with the revoker made beside this exchanger).
    public let signing: AppleSigningHealth
    let client: HTTPClient
    let logger: Logger
    let factory: any MetricsFactory

    public init(
        _ configuration: Configuration,
        store: any AppleTokenStore,
        escrow: Escrow,
        verifier: AppleVerifier,
        clientSecret: @escaping @Sendable (String) async throws -> String,
        client: HTTPClient,
        logger: Logger,
        factory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.factory = factory
        self.configuration = configuration
        self.store = store
        self.escrow = escrow
        self.verifier = verifier
        let signing = AppleSigningHealth()
        self.signing = signing
        self.clientSecret = { clientID in try await signing.recording { try await clientSecret(clientID) } }
        self.client = client
        self.logger = logger
    }

    public func run() async throws {
        await AppleClaimLoop.run(escrow: escrow, poll: configuration.poll) { await self.runOnce() }
    }

    /// Claims a batch of due exchanges and works through them; returns how many were claimed.
    @discardableResult
    public func runOnce() async -> Int {
        await AppleClaimLoop.batch("Apple token exchanges", logger: logger) {
            try await store.claimAppleExchanges(
                at: escrow.configuration.clock.now(),
                limit: Configuration.batch,
                lease: configuration.lease
            )
        } work: { await self.exchange($0) }
    }

    /// What one attempt came to.
    enum Step: Equatable {
        case end(AppleTokenExchange.Outcome)
        /// Not answered (Apple unreachable or failing, the client secret not minted): tried again later.
        case retry(String)
    }

    func exchange(_ exchange: AppleTokenExchange) async {
        let now = escrow.configuration.clock.now()
        var metadata: Logger.Metadata = ["escrow.id": "\(exchange.escrowID.hex)", "attempt": "\(exchange.attempts)"]
        let step: Step
        if now >= exchange.expiresAt {
            step = .end(.refused(AppleTokenExchange.timedOut))
        } else {
            do {
                guard let record = try await escrow.store.record(id: exchange.escrowID) else { return }  // purged
                step = await attempt(exchange, record: record, now: now)
            } catch {
                step = .retry("the store failed: \(error)")
            }
        }
        let ended = escrow.configuration.clock.now()
        do {
            switch step {
            case .end(let outcome):
                let name = Self.name(outcome)
                metadata["outcome"] = "\(name)"
                AppleTokenMetrics.exchanged(name, factory: factory)
                if try await store.endAppleExchange(
                    exchange.key,
                    attempts: exchange.attempts,
                    outcome: outcome,
                    at: ended
                ) {
                    logger.info("Apple token exchange ended", metadata: metadata)
                }
            case .retry(let reason):
                metadata["reason"] = "\(reason)"
                AppleTokenMetrics.exchanged("retried", factory: factory)
                let next = configuration.retry(after: exchange.attempts, now: ended, expiresAt: exchange.expiresAt)
                _ = try await store.rescheduleAppleExchange(
                    exchange.key,
                    attempts: exchange.attempts,
                    at: next
                )
                logger.warning("Apple token exchange not answered; tried again", metadata: metadata)
            }
        } catch {
            // The lease runs out and the exchange is claimed again.
            logger.error(
                "cannot record an Apple token exchange's outcome",
                metadata: metadata.merging(["error": "\(error)"]) { $1 }
            )
        }
    }

    /// One request to Apple's token endpoint and what its answer means.
    private func attempt(_ exchange: AppleTokenExchange, record: EscrowRecord, now: Date) async -> Step {
        let code: String
        do {
            code = try escrow.openAppleCode(exchange)
        } catch {
            return .retry("this keyring cannot open the code")
        }
        let secret: String
        do {
            secret = try await clientSecret(exchange.clientID)
        } catch {
            return .retry("no client secret: Apple's key is unavailable")
        }
        var fields = [
            ("grant_type", "authorization_code"), ("code", code), ("client_id", exchange.clientID),
            ("client_secret", secret),
        ]
        if let redirectURI = exchange.redirectURI { fields.append(("redirect_uri", redirectURI)) }
        let answer: AppleFormAnswer
        do {
            answer = try await AppleFormAnswer.post(
                fields,
                to: configuration.tokenURL,
                timeout: min(configuration.timeout, exchange.expiresAt.timeIntervalSince(now)),
                client: client
            )
        } catch {
            return .retry("Apple's token endpoint is unreachable")
        }
        guard answer.status == 200 else {
            // Apple's refusal is final for this code; anything else (5xx, 429, a body without an error) is retried.
            if let refusal = answer.errorCode, (400..<500).contains(answer.status), answer.status != 429 {
                return .end(.refused(refusal))
            }
            return .retry("Apple answered \(answer.status)")
        }
        guard let idToken = answer.string("id_token"), let refreshToken = answer.string("refresh_token") else {
            return .end(.refused("invalid_response"))
        }
        do {
            let identity = try await verifier.verifySignInToken(
                idToken,
                audiences: [exchange.clientID],
                nonceHash: nil,
                authorizationCode: code,
                now: now
            )
            // Apple's `sub` must be the escrow's user: compared through the keyed blind index, nothing opened.
            guard escrow.keyring.blindIndex(userIdentifier: identity.userIdentifier) == record.blindIndex else {
                return .end(.refused("subject_mismatch"))
            }
        } catch {
            return .end(.refused("id_token_invalid"))
        }
        do {
            let tokens = SecretBytes(copying: Array(refreshToken.utf8))
            return .end(.tokens(sealed: try escrow.keyring.sealAppleTokens(tokens, into: record.sealed)))
        } catch {
            return .retry("the tokens cannot be sealed")
        }
    }

    static func name(_ outcome: AppleTokenExchange.Outcome) -> String {
        switch outcome {
        case .tokens: "tokens"
        case .refused(let code): code
        }
    }
}

/// Apple's answer to a form POST (`/auth/token`, `/auth/revoke`): its status and the string members of its JSON
/// object, of which only the `error` code is ever shown.
struct AppleFormAnswer: Sendable {
    let status: Int
    let strings: [String: String]

    func string(_ key: String) -> String? { strings[key] }

    /// Apple's `error` code when it is one (lowercase letters and `_`, at most 64), else nil.
    var errorCode: String? {
        guard let code = string("error"), !code.isEmpty, code.utf8.count <= 64,
            code.utf8.allSatisfy({ (97...122).contains($0) || $0 == 95 })
        else { return nil }
        return code
    }

    /// POSTs `fields` form-encoded, with no redirect followed; reads at most 64 KiB of the answer.
    static func post(
        _ fields: [(String, String)],
        to url: String,
        timeout: Double,
        client: HTTPClient
    ) async throws -> AppleFormAnswer {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        let body = fields.map { "\($0.0)=\(SignInForm.encode($0.1))" }.joined(separator: "&")
        request.body = .bytes(ByteBuffer(string: body))
        let response = try await client.execute(request, timeout: .milliseconds(Int64(max(timeout, 0.1) * 1000)))
        let bytes = try await response.body.collect(upTo: 64 * 1024)
        let object = try? JSONSerialization.jsonObject(with: Data(bytes.readableBytesView)) as? [String: Any]
        return AppleFormAnswer(
            status: Int(response.status.code),
            strings: (object ?? [:]).compactMapValues { $0 as? String }
        )
    }
}

/// The loop of Apple's background work (exchanges, revocations) until graceful shutdown: a batch at a time while
/// there is work, a poll's wait when there is none. A node that cannot open what is queued (public-only keyring, or
/// keys still wrapped) claims nothing and leaves it to one that can.
///
/// A graceful shutdown ends the loop between batches, never inside one: an authorization code is single-use, so a
/// code Apple has just redeemed must have its outcome recorded, or the refresh token is lost (another node's retry
/// would only be told `invalid_grant`). A batch ends within one request timeout and the store's writes around it.
enum AppleClaimLoop {
    static func run(escrow: Escrow, poll: Double, _ runOnce: @escaping @Sendable () async -> Int) async {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let keyring = escrow.keyring
            let claimed = keyring.isPublicOnly || keyring.isWrapped ? 0 : await runOnce()
            if claimed == 0 {
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .milliseconds(Int(poll * 1000))) }
            }
        }
    }

    /// Items claimed at once, and worked at once.
    static let concurrency = 16

    /// One batch: the items `claim` took, given to `work` side by side, when all are done; how many. A store that
    /// fails the claim is logged (`what` names the queue) and counts none, so the loop waits a poll.
    static func batch<Item: Sendable>(
        _ what: String,
        logger: Logger,
        claim: () async throws -> [Item],
        work: @escaping @Sendable (Item) async -> Void
    ) async -> Int {
        let claimed: [Item]
        do {
            claimed = try await claim()
        } catch {
            logger.error("cannot claim \(what)", metadata: ["error": "\(error)"])
            return 0
        }
        await withDiscardingTaskGroup { group in
            for item in claimed { group.addTask { await work(item) } }
        }
        return claimed.count
    }
}

/// The Apple token metrics: outcomes' codes only.
enum AppleTokenMetrics {
    /// `profile_escrow_apple_exchanges_total{outcome}`: `tokens`, Apple's error code, `exchange_timed_out`,
    /// `retried`.
    static func exchanged(_ outcome: String, factory: any MetricsFactory) {
        Counter(label: "profile_escrow_apple_exchanges_total", dimensions: [("outcome", outcome)], factory: factory)
            .increment()
    }

    /// `profile_escrow_apple_revocations_total{outcome}`: `revoked`, `failed` (given up), `retried`.
    static func revoked(_ outcome: String, factory: any MetricsFactory) {
        Counter(label: "profile_escrow_apple_revocations_total", dimensions: [("outcome", outcome)], factory: factory)
            .increment()
    }
}
