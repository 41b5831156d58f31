import EscrowCore
import EscrowSQLite
import EscrowTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import ProfileEscrow
import Prometheus
import Testing

@testable import EscrowHTTP

/// The console's sessions live in the store: a session made by one application is served by another on a store
/// opened again on the same file (a restart, or a second node), signs out everywhere, and ends with its token.
@Suite("/console sessions in the store: across a restart and between nodes")
struct ConsoleSessionNodesTests {
    typealias Browser = ConsoleTests.Browser

    /// An application over its own store opened on the harness's database file: another process on it.
    static func node(_ harness: HTTPHarness) throws -> EscrowHTTPApplication.App {
        let store = try SQLiteEscrowStore(path: harness.databasePath, logger: harness.logger)
        let escrow = Escrow(
            store: store,
            keyring: harness.keyring,
            configuration: harness.escrow.configuration,
            logger: harness.logger
        )
        var configuration = harness.configuration
        configuration.port = 0
        return try EscrowHTTPApplication.build(
            escrow: escrow,
            tokens: harness.tokenStore,
            notifications: store,
            signIns: store,
            registry: PrometheusCollectorRegistry(),
            configuration: configuration,
            dependencies: harness.dependencies,
            logger: harness.logger
        )
    }

    @Test("a session made on one node is served by another; a form posted on one is shown on the other")
    func sessionOnEveryNode() async throws {
        let harness = try await HTTPHarness()
        let (browser, csrf) = try await harness.app().test(.router) { client in
            let (browser, home) = try await ConsoleTests.signIn("operate", harness, client)
            #expect(home.status == .ok)
            return (browser, try #require(Browser.csrf(home)))
        }
        // A new application on a new store over the same file: nothing of the first is in its memory.
        try await Self.node(harness).test(.router) { client in
            let home = try await client.execute(uri: "/console/", method: .get, headers: browser.headers())
            #expect(home.status == .ok, "the other node serves the session")
            #expect(Browser.csrf(home) == csrf, "with the same CSRF token, derived from the cookie")
            let pause = try await client.execute(
                uri: "/console/deliveries/pause",
                method: .post,
                headers: browser.headers(form: true),
                body: Browser.form([("csrf", csrf), ("reason", "node test")])
            )
            let location = try #require(pause.headers[.location])
            #expect(location.hasPrefix("/console/result/"), "\(location)")
            // The redirect's GET lands on the first node: the held page is the store's.
            try await harness.app().test(.router) { first in
                let shown = try await first.execute(uri: location, method: .get, headers: browser.headers())
                #expect(shown.status == .ok, "the held page is shown on the other node")
                let again = try await first.execute(uri: location, method: .get, headers: browser.headers())
                #expect(again.status == .gone, "once")
            }
            let forged = try await client.execute(
                uri: "/console/deliveries/resume",
                method: .post,
                headers: browser.headers(form: true),
                body: Browser.form([("csrf", "forged"), ("reason", "node test")])
            )
            #expect(
                try await browser.follow(forged, client).status == .forbidden,
                "a wrong CSRF token is still refused"
            )
        }
        try await harness.app().test(.router) { client in
            let signOut = try await client.execute(
                uri: "/console/signout",
                method: .post,
                headers: browser.headers(form: true),
                body: Browser.form([("csrf", csrf)])
            )
            #expect(signOut.status == .seeOther)
        }
        try await Self.node(harness).test(.router) { client in
            let home = try await client.execute(uri: "/console/", method: .get, headers: browser.headers())
            #expect(home.headers[.location] == "/console/signin", "signed out on one node, out on every node")
        }
    }

    @Test("a revoked token ends its sessions on every node at their next request")
    func revocationEndsSessionsEverywhere() async throws {
        let harness = try await HTTPHarness()
        let browser = try await harness.app().test(.router) { client in
            try await ConsoleTests.signIn("read", harness, client).0
        }
        let other = try Self.node(harness)
        try await other.test(.router) { client in
            let home = try await client.execute(uri: "/console/", method: .get, headers: browser.headers())
            #expect(home.status == .ok)
            // Revoked by another process on the token file (the CLI's `tokens revoke`).
            let tokens = try SQLiteTokenStore(path: harness.tokensPath, logger: harness.logger)
            #expect(try await tokens.revokeToken(name: "scope-read", at: Date()))
            let after = try await client.execute(uri: "/console/", method: .get, headers: browser.headers())
            #expect(after.headers[.location] == "/console/signin", "the next request is signed out")
        }
        let idHash = try ConsoleSessions.hash(#require(browser.cookies[ConsoleRoutes.sessionCookie]))
        #expect(
            try await harness.store.consoleSession(idHash: idHash, now: Date(), idle: 3600) == nil,
            "the session was deleted from the store"
        )
    }

    @Test("ended sessions are swept by the retention sweep")
    func sweep() async throws {
        let harness = try await HTTPHarness()
        let browser = try await harness.app().test(.router) { client in
            try await ConsoleTests.signIn("read", harness, client).0
        }
        let idHash = try ConsoleSessions.hash(#require(browser.cookies[ConsoleRoutes.sessionCookie]))
        let signedIn = try #require(try await harness.store.consoleSession(idHash: idHash, now: Date(), idle: 60))
        // The fixture's clock drives the sweep: past the idle end, the row goes.
        harness.clock.advance(by: ConsoleSessionLimits.idle + 120)
        _ = try await harness.escrow.sweep()
        #expect(
            try await harness.store.consoleSession(idHash: idHash, now: signedIn.lastSeenAt, idle: 3600) == nil,
            "swept"
        )
    }
}
