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

/// A real SQLite store and keyring behind the HTTP application, logs captured in memory, and one
/// token per scope (`scope-<name>`) plus `all` with every scope.
struct HTTPHarness {
    let directory = TemporaryDirectory()
    let keyring: Keyring
    let logs = InMemoryLogHandler()
    let logger: Logger
    let store: SQLiteEscrowStore
    /// The bearer tokens, in their own file beside the database (as `serve` keeps them).
    let tokenStore: SQLiteTokenStore
    let escrow: Escrow
    let registry = PrometheusCollectorRegistry()
    var configuration = EscrowHTTPConfiguration()
    /// Scope name (or "all") → bearer token.
    let tokens: [String: String]

    var databasePath: String { directory.path + "/escrow.sqlite" }
    var tokensPath: String { directory.path + "/tokens.sqlite" }

    init(
        keyring: Keyring = Keyring.generate(),
        apple: AppleVerifier? = nil,
        rateLimit: RateLimit = RateLimit(),
        checkpointAfterPurge: Bool = true
    ) async throws {
        self.keyring = keyring
        var handler = logs
        handler.logLevel = .trace
        logger = Logger(label: "http-test") { _ in handler }
        var storeConfiguration = SQLiteEscrowStore.Configuration()
        storeConfiguration.checkpointAfterPurge = checkpointAfterPurge
        store = try SQLiteEscrowStore(
            path: directory.path + "/escrow.sqlite",
            configuration: storeConfiguration,
            logger: logger
        )
        tokenStore = try SQLiteTokenStore(path: directory.path + "/tokens.sqlite", logger: logger)
        escrow = Escrow(store: store, keyring: keyring, logger: logger)
        configuration.apple = apple
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

    func app() -> EscrowHTTPApplication.App {
        var configuration = configuration
        configuration.port = 0
        return EscrowHTTPApplication.build(
            escrow: escrow,
            tokens: tokenStore,
            notifications: store,
            registry: registry,
            configuration: configuration,
            logger: logger
        )
    }

    func headers(_ token: String? = "all", json: Bool = false) -> HTTPFields {
        var fields = HTTPFields()
        if let token { fields[.authorization] = "Bearer \(tokens[token] ?? token)" }
        if json { fields[.contentType] = "application/json" }
        return fields
    }

    /// Everything that was logged, flattened to text (messages and metadata).
    func loggedText() -> String {
        logs.entries.map { "\($0.level) \($0.message) \($0.metadata)" }.joined(separator: "\n")
    }

    /// Live escrows in the store, any state.
    func liveCount() async throws -> Int {
        try await store.summary(at: Date()).live.values.reduce(0, +)
    }

    func auditEvents() async throws -> [AuditEvent] {
        try await store.auditEvents(after: 0, limit: 10_000)
    }

    /// Every byte of the database, its `-wal` and its `-shm`.
    func storeFiles() -> [[UInt8]] {
        ["", "-wal", "-shm"].compactMap { suffix in
            FileManager.default.fileExists(atPath: databasePath + suffix)
                ? [UInt8](ProfileEscrowCLI.contents(atPath: databasePath + suffix)) : nil
        }
    }
}

/// Obviously fake profiles whose personal fields carry scannable canary tokens.
enum Fake {
    static let tokens = ["CANARYGIVEN", "CANARYFAMILY", "canarymail", "canaryuid"]

    static func userIdentifier(_ number: Int) -> String {
        "000000.canaryuid\(String(format: "%023d", number)).0001"
    }

    static func email(_ number: Int) -> String { "canarymail\(number)@example.invalid" }

    static func profileObject(_ number: Int, given: String? = nil, email: String? = nil) -> [String: Any] {
        [
            "userIdentifier": userIdentifier(number),
            "fullName": ["givenName": given ?? "CANARYGIVEN\(number)", "familyName": "CANARYFAMILY\(number)"],
            "email": email ?? self.email(number),
            "realUserStatus": "likelyReal",
        ]
    }

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
