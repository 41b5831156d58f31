import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import ProfileEscrow
import Testing

@testable import EscrowHTTP

@Suite("/console: sessions, CSRF, roles")
struct ConsoleTests {
    /// A browser's cookie jar for one test client: just the console's cookies.
    final class Browser: @unchecked Sendable {
        var cookies: [String: String] = [:]

        func headers(form: Bool = false, origin: String? = nil) -> HTTPFields {
            var fields = HTTPFields()
            if !cookies.isEmpty {
                fields[.cookie] = cookies.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(
                    separator: "; "
                )
            }
            if form { fields[.contentType] = "application/x-www-form-urlencoded" }
            if let origin { fields[.origin] = origin }
            return fields
        }

        func keep(_ response: TestResponse) {
            for value in response.headers[values: .setCookie] {
                let pair = value.split(separator: ";")[0].split(separator: "=", maxSplits: 1)
                let name = String(pair[0])
                let content = pair.count == 2 ? String(pair[1]) : ""
                if content.isEmpty { cookies[name] = nil } else { cookies[name] = content }
            }
        }

        static func csrf(_ page: TestResponse) -> String? {
            let text = page.text
            guard let range = text.range(of: "name=\"csrf\" value=\"") else { return nil }
            return String(text[range.upperBound...].prefix { $0 != "\"" })
        }

        /// Follows a form's `303` (POST, redirect, GET) to the page held for it, as a browser does.
        func follow(_ response: TestResponse, _ client: some TestClientProtocol) async throws -> TestResponse {
            #expect(response.status == .seeOther, "a form is answered with a redirect")
            let location = try #require(response.headers[.location])
            #expect(location.hasPrefix("/console/result/"), "\(location)")
            return try await client.execute(uri: location, method: .get, headers: headers())
        }

        static func form(_ fields: [(String, String)]) -> ByteBuffer {
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-._~")
            return ByteBuffer(
                string: fields.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed)!)" }
                    .joined(separator: "&")
            )
        }
    }

    /// Signs in with `token` and returns the browser and the first page's CSRF token.
    static func signIn(
        _ token: String,
        _ harness: HTTPHarness,
        _ client: some TestClientProtocol
    ) async throws -> (Browser, TestResponse) {
        let browser = Browser()
        let form = try await client.execute(uri: "/console/signin", method: .get, headers: browser.headers())
        browser.keep(form)
        let csrf = try #require(Browser.csrf(form))
        let signedIn = try await client.execute(
            uri: "/console/signin",
            method: .post,
            headers: browser.headers(form: true),
            body: Browser.form([("csrf", csrf), ("token", harness.tokens[token] ?? token)])
        )
        #expect(signedIn.status == .seeOther)
        browser.keep(signedIn)
        let home = try await client.execute(uri: "/console/", method: .get, headers: browser.headers())
        return (browser, home)
    }

    @Test("sign-in sets a __Host- session cookie; pages are strict, uncached, free of personal data")
    func signInAndPages() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            let ids = try await AdminRoutesTests.capture(3, harness, client)
            try await AdminRoutesTests.kill(ids[0], harness)
            let anonymous = try await client.execute(uri: "/console/escrows", method: .get)
            #expect(anonymous.status == .seeOther)
            #expect(anonymous.headers[.location] == "/console/signin")
            // A browser that dropped the Secure cookie (plain HTTP) is told why instead of looping.
            let dropped = try await client.execute(uri: "/console/?signedin", method: .get)
            #expect(dropped.status == .forbidden && dropped.text.contains("HTTPS"))

            let browser = Browser()
            let form = try await client.execute(uri: "/console/signin", method: .get)
            browser.keep(form)
            let csrf = try #require(Browser.csrf(form))
            let wrong = try await client.execute(
                uri: "/console/signin",
                method: .post,
                headers: browser.headers(form: true),
                body: Browser.form([("csrf", csrf), ("token", "pe_wrong")])
            )
            #expect(wrong.status == .unauthorized)
            let signedIn = try await client.execute(
                uri: "/console/signin",
                method: .post,
                headers: browser.headers(form: true),
                body: Browser.form([("csrf", csrf), ("token", harness.tokens["read"]!)])
            )
            #expect(signedIn.status == .seeOther)
            let cookie = try #require(
                signedIn.headers[values: .setCookie].first { $0.hasPrefix(ConsoleRoutes.sessionCookie + "=") }
            )
            for flag in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/"] { #expect(cookie.contains(flag)) }
            browser.keep(signedIn)
            for uri in [
                "/console/", "/console/escrows?state=dead", "/console/escrows/\(ids[0])", "/console/keys",
            ] {
                let page = try await client.execute(uri: uri, method: .get, headers: browser.headers())
                #expect(page.status == .ok, "\(uri)")
                #expect(page.headers[.cacheControl] == "no-store")
                let policy = try #require(page.headers[.contentSecurityPolicy])
                #expect(policy.contains("default-src 'none'") && policy.contains("frame-ancestors 'none'"))
                #expect(!policy.contains("unsafe-inline"))
                #expect(!page.text.contains("<script"))
                for token in Fake.tokens { #expect(!page.text.contains(token), "\(uri)") }
                for token in harness.tokens.values { #expect(!page.text.contains(token), "\(uri)") }
            }
            let report = try await client.execute(
                uri: "/console/purge-report",
                method: .get,
                headers: browser.headers()
            )
            #expect(report.status == .forbidden)
            let requeue = try await client.execute(
                uri: "/console/escrows/\(ids[0])/requeue",
                method: .post,
                headers: browser.headers(form: true),
                body: Browser.form([("csrf", browser.cookies.isEmpty ? "" : Browser.csrf(form) ?? ""), ("reason", "x")])
            )
            #expect(try await browser.follow(requeue, client).status == .forbidden)
        }
    }

    @Test("an operator requeues and erases with a reason; a forged CSRF token or origin is refused; revoked ends it")
    func operatorActions() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            let ids = try await AdminRoutesTests.capture(2, harness, client)
            try await AdminRoutesTests.kill(ids[0], harness)
            let (browser, home) = try await Self.signIn("all", harness, client)
            #expect(home.status == .ok)
            let page = try await client.execute(
                uri: "/console/escrows/\(ids[0])",
                method: .get,
                headers: browser.headers()
            )
            let csrf = try #require(Browser.csrf(page))
            let forged = try await client.execute(
                uri: "/console/escrows/\(ids[0])/requeue",
                method: .post,
                headers: browser.headers(form: true),
                body: Browser.form([("csrf", "forged"), ("reason", "OPS-9")])
            )
            #expect(try await browser.follow(forged, client).status == .forbidden)
            let crossSite = try await client.execute(
                uri: "/console/escrows/\(ids[0])/requeue",
                method: .post,
                headers: browser.headers(form: true, origin: "https://evil.example"),
                body: Browser.form([("csrf", csrf), ("reason", "OPS-9")])
            )
            #expect(try await browser.follow(crossSite, client).status == .forbidden)
            let noReason = try await client.execute(
                uri: "/console/escrows/\(ids[0])/requeue",
                method: .post,
                headers: browser.headers(form: true),
                body: Browser.form([("csrf", csrf), ("reason", " ")])
            )
            #expect(try await browser.follow(noReason, client).status == .badRequest)
            let requeued = try await client.execute(
                uri: "/console/escrows/\(ids[0])/requeue",
                method: .post,
                headers: browser.headers(form: true),
                body: Browser.form([("csrf", csrf), ("reason", "OPS-7 <b>backend</b> back")])
            )
            let requeuedPage = try await browser.follow(requeued, client)
            #expect(requeuedPage.status == .ok)
            #expect(requeuedPage.text.contains("Requeued."))
            #expect(requeuedPage.text.contains("OPS-7 &lt;b&gt;backend&lt;/b&gt; back"), "the reason is escaped")
            #expect(!requeuedPage.text.contains("<b>backend"))
            // The held page is shown once: a reload finds nothing, and posts nothing again.
            let reload = try await client.execute(
                uri: try #require(requeued.headers[.location]),
                method: .get,
                headers: browser.headers()
            )
            #expect(reload.status == .gone && !reload.text.contains("Requeued."))
            let erased = try await client.execute(
                uri: "/console/escrows/\(ids[1])/erase",
                method: .post,
                headers: browser.headers(form: true),
                body: Browser.form([("csrf", csrf), ("reason", "OPS-8 user asked")])
            )
            let erasedPage = try await browser.follow(erased, client)
            #expect(erasedPage.status == .ok)
            #expect(erasedPage.text.contains("Erased."))
            let lookup = try await client.execute(
                uri: "/console/lookup",
                method: .post,
                headers: browser.headers(form: true),
                body: Browser.form([("csrf", csrf), ("userIdentifier", Fake.userIdentifier(1))])
            )
            // POST, redirect, GET: the URL holds a random result id, never the identifier typed.
            let location = try #require(lookup.headers[.location])
            #expect(!location.contains(Fake.userIdentifier(1)) && !location.contains("userIdentifier"))
            let answer = try await browser.follow(lookup, client)
            #expect(answer.status == .ok)
            #expect(answer.text.contains("Yes: this user has a live escrow."))
            #expect(!answer.text.contains(Fake.userIdentifier(1)))
            let invalid = try await client.execute(
                uri: "/console/lookup",
                method: .post,
                headers: browser.headers(form: true),
                body: Browser.form([("csrf", csrf), ("userIdentifier", "not an identifier")])
            )
            let refused = try await browser.follow(invalid, client)
            #expect(refused.status == .badRequest && !refused.text.contains("not an identifier"))

            _ = try await harness.tokenStore.revokeToken(name: "all", at: Date())
            let afterRevoke = try await client.execute(uri: "/console/", method: .get, headers: browser.headers())
            #expect(afterRevoke.status == .seeOther)
        }
        let events = try await harness.auditEvents()
        let requeue = try #require(events.last { $0.draft.type == .requeued })
        #expect(requeue.draft.actor.rawValue == "console:all")
        #expect(requeue.draft.reason == "OPS-7 <b>backend</b> back")
        let erase = try #require(events.last { $0.draft.type == .purged })
        #expect(erase.draft.detail == "erased" && erase.draft.reason == "OPS-8 user asked")
        for token in Fake.tokens { #expect(!harness.loggedText().contains(token)) }
    }

    @Test("/console/tokens is an operator's (operate): a viewer and an auditor are refused and get no link")
    func tokensNeedOperate() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            for (token, allowed) in [("read", false), ("audit", false), ("erase", false), ("operate", true)] {
                let (browser, _) = try await Self.signIn(token, harness, client)
                let tokens = try await client.execute(uri: "/console/tokens", method: .get, headers: browser.headers())
                #expect(tokens.status == (allowed ? .ok : .forbidden), "\(token)")
                #expect(tokens.text.contains("id=\"tokens\"") == allowed, "\(token): the list only to an operator")
                #expect(!allowed || tokens.text.contains("scope-metrics"), "\(token): every token's name")
                let page = try await client.execute(uri: "/console/keys", method: .get, headers: browser.headers())
                // Every page's navigation (a refusal's too) links the tokens for an operator only.
                #expect(page.text.contains("href=\"/console/tokens\"") == allowed, "\(token): the link")
            }
        }
    }

    @Test("a held answer is its own session's, once, for a minute at most, sealed in the store")
    func heldResultsAreSingleUse() async throws {
        let fixture = try EscrowFixture()
        let sessions = ConsoleSessions(store: fixture.store)
        let now = Date()
        let mine = try await sessions.create(tokenHash: [1], now: now)
        let theirs = try await sessions.create(tokenHash: [2], now: now)
        let first = try await sessions.hold(.ok, "<p>one</p>", sessionID: mine.id, now: now)
        #expect(try await sessions.take(first, sessionID: theirs.id, now: now) == nil, "another session's")
        #expect(try await sessions.take(first, sessionID: mine.id, now: now)?.html == "<p>one</p>")
        #expect(try await sessions.take(first, sessionID: mine.id, now: now) == nil, "once")
        let late = try await sessions.hold(.ok, "<p>late</p>", sessionID: mine.id, now: now)
        let later = now.addingTimeInterval(ConsoleSessions.heldLifetime + 1)
        #expect(try await sessions.take(late, sessionID: mine.id, now: later) == nil, "past its minute")
        // The store holds the page sealed: neither the HTML nor the cookie's value nor the CSRF token is in the file.
        _ = try await sessions.hold(.ok, "<p>a typed reason</p>", sessionID: mine.id, now: now)
        let file = try Data(contentsOf: URL(fileURLWithPath: fixture.store.path))
            + ((try? Data(contentsOf: URL(fileURLWithPath: fixture.store.path + "-wal"))) ?? Data())
        for secret in ["a typed reason", mine.id, mine.csrf] {
            #expect(file.range(of: Data(secret.utf8)) == nil, "not stored as it is")
        }
        try await sessions.end(id: mine.id)
        #expect(try await sessions.session(id: mine.id, now: now) == nil, "ended")
    }

    @Test("an escrow whose row someone broke: its page says so (409), never 'the store did not answer'")
    func malformedRowPage() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            let ids = try await AdminRoutesTests.capture(1, harness, client)
            try await MalformedRowHTTPTests.tamper(harness, user: 1, "key_version = 4294967297")
            let (browser, _) = try await Self.signIn("all", harness, client)
            let page = try await client.execute(
                uri: "/console/escrows/\(ids[0])",
                method: .get,
                headers: browser.headers()
            )
            #expect(page.status == .conflict)
            #expect(page.text.contains("malformed") && !page.text.contains("did not answer"))
        }
    }
}
