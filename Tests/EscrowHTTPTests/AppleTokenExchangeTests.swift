import AsyncHTTPClient
import Crypto
import EscrowCore
import EscrowCrypto
import EscrowCustody
import EscrowSQLite
import EscrowTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import ProfileEscrow
import Prometheus
import ServiceLifecycle
import Testing

@testable import EscrowHTTP

/// The authorization code redeemed at the source: a web sign-in over a real socket queues its code with the capture,
/// the exchanger redeems it at a stand-in Apple on loopback that verifies every client secret, and a real worker
/// delivers the refresh token, signed, to a real backend: never in the redeem answer, a log or the store's files.
@Suite("Apple token exchange")
struct AppleTokenExchangeTests {
    static let teamID = "FAKETEAM01"
    static let keyID = "FAKEKEY001"

    /// A sign-in flow whose codes are exchanged here, a stand-in Apple, and the exchanger between them (its client
    /// secrets signed with a file-kept key).
    struct Exchange {
        let flow: SignInFlow
        let apple: StandInApple
        let exchanger: AppleTokenExchanger
        let client: HTTPClient
        let secrets: AppleClientSecrets
        /// The exchanger's metrics (and a test's revoker's), read as `/metrics` would print them.
        let registry = PrometheusCollectorRegistry()

        /// - Parameter signer: signs the client secrets instead of the `.p8` file written here (one that cannot).
        init(signer: (any AppleClientSecretSigner)? = nil) async throws {
            var flow = try await SignInFlow()
            flow.harness.configuration.signIn?.exchangesCodes = true
            flow.harness.configuration.exchangesAppleCodes = true
            let key = P256.Signing.PrivateKey()
            let path = flow.harness.fixture.directory.path + "/AuthKey_\(AppleTokenExchangeTests.keyID).p8"
            try Data(key.pemRepresentation.utf8).write(to: URL(fileURLWithPath: path))
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
            apple = StandInApple(
                teamID: AppleTokenExchangeTests.teamID,
                keyID: AppleTokenExchangeTests.keyID,
                publicKey: key.publicKey
            )
            try await apple.start()
            let secrets = AppleClientSecrets(
                teamID: AppleTokenExchangeTests.teamID,
                keyID: AppleTokenExchangeTests.keyID,
                signer: try signer ?? AppleKeyFileSigner(path: path)
            )
            self.secrets = secrets
            client = AppleKeyFetcher.makeClient(logger: flow.harness.logger)
            var configuration = AppleTokenExchanger.Configuration(tokenURL: apple.tokenURL)
            configuration.maximumBackoff = 1
            exchanger = AppleTokenExchanger(
                configuration,
                store: flow.harness.fixture.store,
                escrow: flow.harness.escrow,
                verifier: try await AppleVerifier(jwksJSON: apple.jwks, audiences: [SignInFlow.clientID]),
                clientSecret: { try await secrets.secret(for: $0).jwt },
                client: client,
                logger: flow.harness.logger,
                factory: EscrowPrometheus.factory(registry: registry)
            )
            self.flow = flow
        }

        func stop() async throws {
            try await client.shutdown()
            await apple.stop()
        }

        /// A web sign-in of user 1 whose form carries a code the stand-in issued; the redeem answer's JSON.
        func signIn(_ client: some TestClientProtocol) async throws -> (code: String, redeemed: [String: Any]) {
            let start = try await flow.start(client)
            var form = try await flow.form(start, user: SignInFlow.userJSON(1))
            let code = apple.issueCode(
                user: SignInFlow.userIdentifier(1),
                clientID: SignInFlow.clientID,
                redirectURI: SignInFlow.callbackURL
            )
            form["code"] = code
            let callback = try await flow.callback(client, form, cookie: start.cookie)
            let ticket = try #require(SignInFlow.query(callback.headers[.location] ?? "")["ticket"])
            let redeemed = try await flow.redeem(client, ticket)
            #expect(redeemed.status == .ok)
            return (code, redeemed.json)
        }

        /// The escrow's delivery by a real worker to a real backend: the body it signed.
        func deliver() async throws -> (body: [String: Any], bytes: [UInt8]) {
            let secret = WebhookSecret.generateText()
            let backend = try await FakeBackend.start(secret: secret)
            defer { Task { await backend.stop() } }
            let configuration = try ReplayWorker.Configuration(backendURL: backend.url, webhookSecret: secret)
            let worker = try ReplayWorker(
                escrow: flow.harness.escrow,
                configuration: configuration,
                logger: flow.harness.logger
            )
            _ = try await worker.runOnce()
            let request = try #require(backend.requests.first)
            #expect(request.signatureValid, "the delivery is signed")
            let body = try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
            return (body, request.body)
        }

        /// A new exchange with one web sign-in done (its code queued), given to `body`, then stopped, whatever `body`
        /// did.
        static func afterSignIn(_ body: @escaping @Sendable (Exchange) async throws -> Void) async throws {
            let exchange = try await Exchange()
            do {
                try await exchange.flow.harness.app().test(.live) { client async throws in
                    _ = try await exchange.signIn(client)
                    try await body(exchange)
                }
            } catch {
                try? await exchange.stop()
                throw error
            }
            try await exchange.stop()
        }

        /// The `appleTokens` of the escrow's signed delivery (``deliver()``).
        func deliveredAppleTokens() async throws -> [String: Any] {
            try #require(try await deliver().body["appleTokens"] as? [String: Any])
        }

        var running: Int { get async throws { try await flow.harness.fixture.store.runningAppleExchangeCount() } }

        /// Each of `values` (a code, a refresh token, a client secret) nowhere outside its sealed column: not logged,
        /// not in a metric, not in clear in the store's files.
        func expectNowhere(_ values: [String]) {
            let logged = flow.harness.loggedText()
            let metrics = String(decoding: EscrowPrometheus.emit(registry), as: UTF8.self)
            for value in values {
                #expect(!logged.contains(value), "nothing secret logged")
                #expect(!metrics.contains(value), "nor in a metric")
                for file in flow.harness.fixture.storeFiles() {
                    #expect(!file.bytes.contains(bytes: Array(value.utf8)), "nothing secret in clear in \(file.name)")
                }
            }
        }

        /// A revoker posting to the stand-in Apple with this exchange's secrets, its metrics in ``registry``.
        func revoker(maximumAttempts: Int? = nil) -> AppleRevoker {
            var configuration = AppleRevoker.Configuration(revokeURL: apple.revokeURL)
            configuration.maximumBackoff = 1
            if let maximumAttempts { configuration.maximumAttempts = maximumAttempts }
            let harness = flow.harness
            return AppleRevoker(
                configuration,
                store: harness.fixture.store,
                escrow: harness.escrow,
                clientSecret: { [secrets] in try await secrets.secret(for: $0).jwt },
                client: client,
                logger: harness.logger,
                factory: EscrowPrometheus.factory(registry: registry)
            )
        }
    }

    @Test("one exchange per code with a valid secret; the refresh token only in the signed delivery")
    func exchangedOnceAndDeliveredSigned() async throws {
        let exchange = try await Exchange()
        try await exchange.flow.harness.app().test(.live) { client async throws in
            let (code, redeemed) = try await exchange.signIn(client)
            #expect(redeemed["authorizationCode"] is NSNull, "the code is not handed out")
            #expect(redeemed["appleTokens"] as? String == "in-escrow")
            #expect(try await exchange.running == 1, "queued with the capture")
            // Held: the worker delivers nothing while the exchange runs.
            let status = try #require(
                try await exchange.flow.harness.escrow.status(userIdentifier: SignInFlow.userIdentifier(1))
            )
            #expect(
                (status.nextAttemptAt ?? .distantPast) > Date().addingTimeInterval(200),
                "the first delivery held for the exchange"
            )

            #expect(await exchange.exchanger.runOnce() == 1)
            #expect(await exchange.exchanger.runOnce() == 0, "exchanged once")
            let requests = exchange.apple.requests
            #expect(requests.count == 1, "one request to Apple")
            #expect(
                requests.first?.secretValid == true,
                "with a client secret Apple accepts: \(requests.first?.secretProblem ?? "")"
            )
            #expect(requests.first?.form["redirect_uri"] == SignInFlow.callbackURL)
            #expect(requests.first?.form["grant_type"] == "authorization_code")
            #expect(try await exchange.running == 0)

            let refreshToken = try #require(exchange.apple.refreshTokens.first)
            let delivered = try await exchange.deliver()
            let tokens = try #require(delivered.body["appleTokens"] as? [String: Any])
            #expect(tokens["refreshToken"] as? String == refreshToken, "the refresh token in the signed body")
            #expect(delivered.body["userIdentifier"] as? String == SignInFlow.userIdentifier(1))

            // Nowhere else: not in the logs, not in the store's files (sealed there), nor the code or the secret.
            let secret = try await exchange.secrets.secret(for: SignInFlow.clientID).jwt
            let metrics = String(decoding: EscrowPrometheus.emit(exchange.registry), as: UTF8.self)
            #expect(metrics.contains("profile_escrow_apple_exchanges_total{outcome=\"tokens\"} 1"))
            exchange.expectNowhere([code, refreshToken, secret])
        }
        try await exchange.stop()
    }

    @Test("Apple down, then back within the code's life: retried until exchanged")
    func outageThenRecovery() async throws {
        try await Exchange.afterSignIn { exchange in
            exchange.apple.script("/auth/token", [.status(503), .status(500)])
            let clock = exchange.flow.harness.fixture.clock
            #expect(await exchange.exchanger.runOnce() == 1)
            #expect(try await exchange.running == 1, "still running after a 503")
            clock.advance(by: 2)
            #expect(await exchange.exchanger.runOnce() == 1)
            clock.advance(by: 2)
            #expect(await exchange.exchanger.runOnce() == 1)
            #expect(try await exchange.running == 0, "exchanged on the third attempt")
            #expect(exchange.apple.requests.map(\.status) == [503, 500, 200])
            let tokens = try await exchange.deliveredAppleTokens()
            #expect(tokens["refreshToken"] as? String == exchange.apple.refreshTokens.first)
        }
    }

    /// A code is single-use: an exchange whose request is out when the node is told to stop must still record what
    /// Apple answered, or the refresh token is lost for good.
    @Test("a graceful shutdown lets the exchange Apple is answering finish and record its tokens")
    func shutdownWaitsForTheExchangeUnderWay() async throws {
        try await Exchange.afterSignIn { exchange in
            exchange.apple.script("/auth/token", [.delay(1.5)])
            let group = ServiceGroup(services: [exchange.exchanger], logger: Logger(label: "test"))
            async let running: Void = group.run()
            try await eventually("the exchange's request reached Apple", within: 20) {
                exchange.apple.delayed == 1
            }
            await group.triggerGracefulShutdown()
            try await running
            #expect(try await exchange.running == 0, "ended before the exchanger stopped")
            #expect(exchange.apple.requests.map(\.status) == [200], "one request, answered")
            let tokens = try await exchange.deliveredAppleTokens()
            #expect(tokens["refreshToken"] as? String == exchange.apple.refreshTokens.first)
        }
    }

    @Test("Apple's refusal is recorded as its code and delivered as such")
    func invalidGrantRecorded() async throws {
        try await Exchange.afterSignIn { exchange in
            exchange.apple.script("/auth/token", [.error("invalid_grant")])
            #expect(await exchange.exchanger.runOnce() == 1)
            #expect(try await exchange.running == 0, "a refusal ends the exchange")
            let tokens = try await exchange.deliveredAppleTokens()
            #expect(tokens["error"] as? String == "invalid_grant")
            #expect(tokens["refreshToken"] == nil)
        }
    }

    @Test("Apple never answering within the five minutes: the delivery goes out, saying so")
    func timedOut() async throws {
        try await Exchange.afterSignIn { exchange in
            exchange.apple.script("/auth/token", [.status(503)])
            #expect(await exchange.exchanger.runOnce() == 1)
            exchange.flow.harness.fixture.clock.advance(by: 301)
            #expect(await exchange.exchanger.runOnce() == 1)
            #expect(try await exchange.running == 0)
            let tokens = try await exchange.deliveredAppleTokens()
            #expect(tokens["error"] as? String == AppleTokenExchange.timedOut)
        }
    }

    @Test("a revocation queued by the backend is sent until Apple takes it, with a valid secret, audit-chained")
    func revocationRetriedUntilTaken() async throws {
        let exchange = try await Exchange()
        let harness = exchange.flow.harness
        try await harness.app().test(.live) { client async throws in
            // A refresh token Apple issued (through a first sign-in's exchange).
            _ = try await exchange.signIn(client)
            await exchange.exchanger.runOnce()
            let refreshToken = try #require(exchange.apple.refreshTokens.first)
            let body = Fake.body(["token": refreshToken, "tokenTypeHint": "refresh_token"])
            let refused = try await client.execute(
                uri: "/v1/apple/revocations",
                method: .post,
                headers: harness.headers("signin", json: true),
                body: body
            )
            #expect(refused.status == .forbidden, "scope revoke only")
            let queued = try await client.execute(
                uri: "/v1/apple/revocations",
                method: .post,
                headers: harness.headers("revoke", json: true),
                body: body
            )
            #expect(queued.status == .accepted)
            let id = try #require(queued.json["revocationId"] as? String)

            let revoker = exchange.revoker()
            exchange.apple.script("/auth/revoke", [.status(503), .error("invalid_client")])
            let read = {
                try await client.execute(
                    uri: "/v1/apple/revocations/\(id)",
                    method: .get,
                    headers: harness.headers("revoke")
                )
            }
            for _ in 0..<3 {
                #expect(await revoker.runOnce() == 1)
                harness.fixture.clock.advance(by: 2)
            }
            #expect(await revoker.runOnce() == 0, "ended")
            let revokes = exchange.apple.requests.filter { $0.path == "/auth/revoke" }
            #expect(revokes.map(\.status) == [503, 400, 200], "retried until 200")
            #expect(revokes.allSatisfy { $0.secretValid == true }, "every attempt with a valid client secret")
            #expect(revokes.last?.form["token_type_hint"] == "refresh_token")
            #expect(exchange.apple.isRevoked(refreshToken))
            let state = try await read()
            #expect(state.json["state"] as? String == "revoked")
            #expect(state.json["attempts"] as? Int == 3)
            #expect(
                try await client.execute(
                    uri: "/v1/apple/revocations/rev_unknown",
                    method: .get,
                    headers: harness.headers("revoke")
                ).status == .notFound
            )

            let events = try await harness.auditEvents()
            let revoked = events.filter { $0.draft.type == .appleTokenRevoked }
            #expect(revoked.map(\.draft.detail) == ["revocation \(id)"], "one audit event, naming the revocation")
            #expect(try await auditChainIsIntact(harness.fixture.store), "chained")
            // The token and the secret in no log, audit event, metric or store file.
            let secret = try await exchange.secrets.secret(for: SignInFlow.clientID).jwt
            let audit = events.map { "\($0.draft)" }.joined()
            let metrics = String(decoding: EscrowPrometheus.emit(exchange.registry), as: UTF8.self)
            #expect(metrics.contains("profile_escrow_apple_revocations_total{outcome=\"revoked\"} 1"))
            #expect(metrics.contains("profile_escrow_apple_revocations_total{outcome=\"retried\"} 2"))
            #expect(metrics.contains("profile_escrow_apple_exchanges_total{outcome=\"tokens\"} 1"))
            for value in [refreshToken, secret] {
                #expect(!harness.loggedText().contains(value))
                #expect(!audit.contains(value))
                #expect(!metrics.contains(value))
                for file in harness.fixture.storeFiles() {
                    #expect(!file.bytes.contains(bytes: Array(value.utf8)), "not in clear in \(file.name)")
                }
            }
        }
        try await exchange.stop()
    }

    @Test("a revocation Apple keeps refusing is given up after its last attempt, with Apple's code")
    func revocationGivenUp() async throws {
        let exchange = try await Exchange()
        let harness = exchange.flow.harness
        let id = try await harness.escrow.queueAppleRevocation(
            token: "r.fake-token",
            tokenTypeHint: "refresh_token",
            clientID: SignInFlow.clientID
        )
        let revoker = exchange.revoker(maximumAttempts: 2)
        exchange.apple.script("/auth/revoke", [.error("invalid_request"), .error("invalid_request")])
        #expect(await revoker.runOnce() == 1)
        harness.fixture.clock.advance(by: 2)
        #expect(await revoker.runOnce() == 1)
        let revocation = try await harness.fixture.store.appleRevocation(id: id)
        #expect(revocation?.outcome == .failed("invalid_request"))
        #expect(revocation?.sealedToken.isEmpty == true, "the token erased once ended")
        let failed = try await harness.auditEvents().filter { $0.draft.type == .appleRevocationFailed }
        #expect(failed.map(\.draft.detail) == ["revocation \(id): invalid_request"])
        try await exchange.stop()
    }
}
