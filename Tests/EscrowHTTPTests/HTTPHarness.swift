import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import InMemoryLogging
import Logging
import NIOCore
import ProfileEscrow
import Prometheus

@testable import EscrowHTTP

/// The shared ``EscrowFixture`` (store, keyring, escrow, clock, logs) behind the HTTP application, with one
/// token per scope (`scope-<name>`) plus `all` with every scope.
@dynamicMemberLookup
struct HTTPHarness {
    let fixture: EscrowFixture
    /// The bearer tokens, in their own file beside the database (as `serve` keeps them).
    let tokenStore: SQLiteTokenStore
    let registry = PrometheusCollectorRegistry()
    var configuration = EscrowHTTPConfiguration()
    var dependencies = EscrowHTTPDependencies()
    /// Scope name (or "all") → bearer token.
    let tokens: [String: String]

    subscript<Value>(dynamicMember keyPath: KeyPath<EscrowFixture, Value>) -> Value { fixture[keyPath: keyPath] }

    var tokensPath: String { fixture.directory.path + "/tokens.sqlite" }

    init(
        keyring: Keyring = Keyring.generate(),
        apple: AppleVerifier? = nil,
        rateLimit: RateLimit = RateLimit(),
        checkpointAfterPurge: Bool = true
    ) async throws {
        var storeConfiguration = SQLiteEscrowStore.Configuration()
        storeConfiguration.checkpointAfterPurge = checkpointAfterPurge
        fixture = try EscrowFixture(keyring: keyring, storeConfiguration: storeConfiguration)
        tokenStore = try SQLiteTokenStore(path: fixture.directory.path + "/tokens.sqlite", logger: fixture.logger)
        dependencies.apple = apple
        configuration.rateLimit = rateLimit
        var tokens: [String: String] = [:]
        for scope in AccessTokenScope.allCases {
            tokens[scope.rawValue] = try await AccessTokens.issue(
                name: "scope-\(scope.rawValue)",
                scopes: [scope],
                store: tokenStore
            )
        }
        tokens["all"] = try await AccessTokens.issue(
            name: "all",
            scopes: Set(AccessTokenScope.allCases),
            store: tokenStore
        )
        self.tokens = tokens
    }

    /// The app, with web sign-in attempts in `signIns` (default: the fixture's store).
    func app(signIns: (any SignInStore)? = nil) -> EscrowHTTPApplication.App {
        var configuration = configuration
        configuration.port = 0
        // Throws only for a TLS configuration that does not load; the harness has none.
        return try! EscrowHTTPApplication.build(
            escrow: fixture.escrow,
            tokens: tokenStore,
            notifications: fixture.store,
            signIns: signIns ?? fixture.store,
            registry: registry,
            configuration: configuration,
            dependencies: dependencies,
            logger: fixture.logger
        )
    }

    func headers(_ token: String? = "all", json: Bool = false) -> HTTPFields {
        var fields = HTTPFields()
        if let token { fields[.authorization] = "Bearer \(tokens[token] ?? token)" }
        if json { fields[.contentType] = "application/json" }
        return fields
    }

    /// `POST` of fake user `number`'s profile to `path` (the capture route), with the all-scopes token.
    func capture(
        _ client: some TestClientProtocol,
        user number: Int = 1,
        at path: String = "/v1/escrows"
    ) async throws -> TestResponse {
        try await client.execute(uri: path, method: .post, headers: headers(json: true), body: Fake.body(number))
    }

    /// Everything that was logged, flattened to text (messages and metadata).
    func loggedText() -> String { fixture.loggedText() }

    /// Live escrows in the store, any state.
    func liveCount() async throws -> Int {
        try await fixture.store.summary(at: fixture.clock.now()).live.values.reduce(0, +)
    }

    func auditEvents() async throws -> [AuditEvent] {
        try await fixture.store.auditEvents(after: 0, limit: 10_000)
    }
}

extension Fake {
    static func body(_ object: [String: Any]) -> ByteBuffer {
        ByteBuffer(bytes: try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }

    static func body(_ number: Int, given: String? = nil, identityToken: String? = nil) -> ByteBuffer {
        var object = profileObject(number, given: given)
        if let identityToken { object["identityToken"] = identityToken }
        return body(object)
    }
}

extension TestResponse {
    /// The body as a JSON object.
    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any] ?? [:]
    }

    var text: String { String(buffer: body) }
}
