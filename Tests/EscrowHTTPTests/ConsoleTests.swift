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
                "/console/tokens",
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
            #expect(requeue.status == .forbidden)
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
            #expect(forged.status == .forbidden)
            let crossSite = try await client.execute(
                uri: "/console/escrows/\(ids[0])/requeue",
                method: .post,
                headers: browser.headers(form: true, origin: "https://evil.example"),
                body: Browser.form([("csrf", csrf), ("reason", "OPS-9")])
            )
            #expect(crossSite.status == .forbidden)
            let noReason = try await client.execute(
                uri: "/console/escrows/\(ids[0])/requeue",
                method: .post,
                headers: browser.headers(form: true),
                body: Browser.form([("csrf", csrf), ("reason", " ")])
            )
            #expect(noReason.status == .badRequest)
            let requeued = try await client.execute(
                uri: "/console/escrows/\(ids[0])/requeue",
                method: .post,
                headers: browser.headers(form: true),
                body: Browser.form([("csrf", csrf), ("reason", "OPS-7 <b>backend</b> back")])
            )
            #expect(requeued.status == .ok)
            #expect(requeued.text.contains("Requeued."))
            #expect(requeued.text.contains("OPS-7 &lt;b&gt;backend&lt;/b&gt; back"), "the reason is escaped")
            #expect(!requeued.text.contains("<b>backend"))
            let erased = try await client.execute(
                uri: "/console/escrows/\(ids[1])/erase",
                method: .post,
                headers: browser.headers(form: true),
                body: Browser.form([("csrf", csrf), ("reason", "OPS-8 user asked")])
            )
            #expect(erased.status == .ok)
            #expect(erased.text.contains("Erased."))
            let lookup = try await client.execute(
                uri: "/console/lookup",
                method: .post,
                headers: browser.headers(form: true),
                body: Browser.form([("csrf", csrf), ("userIdentifier", Fake.userIdentifier(1))])
            )
            #expect(lookup.text.contains("Yes: this user has a live escrow."))
            #expect(!lookup.text.contains(Fake.userIdentifier(1)))

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
}
