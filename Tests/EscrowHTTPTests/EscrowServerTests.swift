import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import InMemoryLogging
import Logging
import Prometheus
import Testing

@testable import EscrowHTTP

/// The library's factory of `serve`: what it builds it shuts down, and the stores it was given it closes, also when
/// the server cannot start.
@Suite("EscrowServer")
struct EscrowServerTests {
    @Test("a server whose port is taken throws, and still closes the token store and the escrow store it was given")
    func failedStartClosesTheStores() async throws {
        let directory = TemporaryDirectory()
        let logs = InMemoryLogHandler()
        let logger = Logger(label: "test") { _ in logs }
        let store = try SQLiteEscrowStore(path: directory.path + "/escrow.sqlite", logger: logger)
        let tokens = try SQLiteTokenStore(path: directory.path + "/tokens.sqlite", logger: logger)
        // Apple's keys, served on a port that is also the one the server is told to take: the fetcher (and its HTTP
        // client, which must be shut down) is built and used before the listener fails to bind.
        let apple = try await StaticHTTPServer.start(.init(body: AppleTestKeys.shared.jwks))
        var configuration = EscrowServer.Configuration()
        configuration.http.port = apple.port
        configuration.apple = EscrowServer.AppleKeys(
            audiences: [AppleTestKeys.audience],
            source: .url(URL(string: apple.url("/auth/keys"))!)
        )
        let stores = EscrowServer.Stores(
            escrows: store,
            notifications: store,
            signIns: store,
            tokens: tokens,
            tokensPlace: directory.path + "/tokens.sqlite",
            closeTokens: { try tokens.close() },
            closeEscrows: { try store.close() }
        )
        // Both answer before.
        try await store.checkReady()
        _ = try await tokens.tokens()

        await #expect(throws: (any Error).self) {
            try await EscrowServer.run(
                configuration,
                stores: stores,
                keyring: Keyring.generate(),
                registry: PrometheusCollectorRegistry(),
                logger: logger
            )
        }

        #expect(apple.requests == ["/auth/keys"], "Apple's keys fetched before the listener failed")
        await #expect(throws: (any Error).self, "the escrow store is closed") { try await store.checkReady() }
        await #expect(throws: (any Error).self, "the token store is closed") { _ = try await tokens.tokens() }
        let messages = logs.entries.map(\.message.description)
        #expect(messages.contains("starting profile-escrow serve"))
        #expect(!messages.contains("stopped"), "a failed server does not say it stopped well")
        await apple.stop()
    }
}
