public import AsyncHTTPClient
public import EscrowCore
import Foundation
public import Logging
public import Metrics
public import ProfileEscrow
public import ServiceLifecycle

/// Sends queued revocations to Apple's `/auth/revoke` until Apple answers `200`: claims due revocations with a lease
/// (any node, one at a time each), posts the token with a fresh client secret, and ends each with its audit event
/// (`apple-token-revoked`, or `apple-revocation-failed` with Apple's last error code once the attempts ran out).
/// The token and the client secret are never logged, counted or put in an error.
public final class AppleRevoker: Service, Sendable {
    public struct Configuration: Sendable {
        /// Apple's revoke endpoint (`--apple-revoke-url`).
        public var revokeURL: String
        /// The longest wait for Apple's answer (seconds).
        public var timeout: Double = 10
        /// Attempts before a revocation is given up (about 12 hours of retries with the default backoff).
        public var maximumAttempts = 48
        /// The longest wait between two attempts (seconds).
        public var maximumBackoff: Double = 900
        /// How often the store is asked for due revocations when none were due (seconds).
        public var poll: Double = 1

        public init(revokeURL: String = "https://appleid.apple.com/auth/revoke") {
            self.revokeURL = revokeURL
        }

        /// Revocations claimed and sent at once (see ``AppleTokenExchanger``).
        static let batch = AppleClaimLoop.concurrency
        /// Each of a batch at most a timeout, side by side, and a margin for the store around them.
        var lease: Double { timeout + 12 }
    }

    public let configuration: Configuration
    let store: any AppleRevocationStore
    let escrow: Escrow
    let clientSecret: @Sendable (String) async throws -> String
    let client: HTTPClient
    let logger: Logger
    let factory: any MetricsFactory

    public init(
        _ configuration: Configuration,
        store: any AppleRevocationStore,
        escrow: Escrow,
        clientSecret: @escaping @Sendable (String) async throws -> String,
        client: HTTPClient,
        logger: Logger,
        factory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.factory = factory
        self.configuration = configuration
        self.store = store
        self.escrow = escrow
        self.clientSecret = clientSecret
        self.client = client
        self.logger = logger
    }

    public func run() async throws {
        await AppleClaimLoop.run(escrow: escrow, poll: configuration.poll) { await self.runOnce() }
    }

    /// Claims a batch of due revocations and sends them; returns how many were claimed.
    @discardableResult
    public func runOnce() async -> Int {
        await AppleClaimLoop.batch("Apple token revocations", logger: logger) {
            try await store.claimAppleRevocations(
                at: escrow.configuration.clock.now(),
                limit: Configuration.batch,
                lease: configuration.lease
            )
        } work: { await self.send($0) }
    }

    private func send(_ revocation: AppleRevocation) async {
        var metadata: Logger.Metadata = ["revocation.id": "\(revocation.id)", "attempt": "\(revocation.attempts)"]
        let failure = await attempt(revocation)
        let now = escrow.configuration.clock.now()
        do {
            if let failure, revocation.attempts < configuration.maximumAttempts {
                metadata["reason"] = "\(failure)"
                AppleTokenMetrics.revoked("retried", factory: factory)
                let backoff = RetryPolicy(base: 1, cap: configuration.maximumBackoff)
                    .ceiling(afterAttempt: revocation.attempts + 1)
                _ = try await store.rescheduleAppleRevocation(
                    id: revocation.id,
                    attempts: revocation.attempts,
                    at: now.addingTimeInterval(backoff * Double.random(in: 0.5...1))
                )
                logger.warning("Apple token revocation not taken; tried again", metadata: metadata)
                return
            }
            let outcome: AppleRevocation.Outcome = failure.map { .failed($0) } ?? .revoked
            AppleTokenMetrics.revoked(failure == nil ? "revoked" : "failed", factory: factory)
            if try await store.endAppleRevocation(
                id: revocation.id,
                attempts: revocation.attempts,
                outcome: outcome,
                at: now,
                actor: .apple
            ) {
                metadata["outcome"] = "\(failure ?? "revoked")"
                logger.log(level: failure == nil ? .info : .error, "Apple token revocation ended", metadata: metadata)
            }
        } catch {
            logger.error(
                "cannot record an Apple token revocation's outcome",
                metadata: metadata.merging(["error": "\(error)"]) { $1 }
            )
        }
    }

    /// One request to Apple's revoke endpoint: nil when Apple answered `200`, else Apple's error code or what
    /// kept the request from being answered.
    private func attempt(_ revocation: AppleRevocation) async -> String? {
        let token: String
        do {
            token = try escrow.openAppleRevocationToken(revocation)
        } catch {
            return "unopenable"
        }
        let secret: String
        do {
            secret = try await clientSecret(revocation.clientID)
        } catch {
            return "client_secret_unavailable"
        }
        do {
            let answer = try await AppleFormAnswer.post(
                [
                    ("client_id", revocation.clientID), ("client_secret", secret), ("token", token),
                    ("token_type_hint", revocation.tokenTypeHint),
                ],
                to: configuration.revokeURL,
                timeout: configuration.timeout,
                client: client
            )
            guard answer.status == 200 else { return answer.errorCode ?? "http_\(answer.status)" }
            return nil
        } catch {
            return "unavailable"
        }
    }
}
