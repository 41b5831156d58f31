import EscrowCore
import EscrowTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import ProfileEscrow
import Testing

@testable import EscrowHTTP

@Suite("Pages: templates, escaping, one policy")
struct PageTemplateTests {
    typealias Browser = ConsoleTests.Browser

    @Test("a stored reason holding a script and quotes is shown escaped, never as markup")
    func storedValuesAreEscaped() async throws {
        let harness = try await HTTPHarness()
        let reason = "OPS-1 \"<script>alert('x')</script>\" & <b>"
        try await harness.app().test(.router) { client async throws in
            let ids = try await AdminRoutesTests.capture(1, harness, client)
            try await AdminRoutesTests.kill(ids[0], harness)
            let (browser, _) = try await ConsoleTests.signIn("all", harness, client)
            let page = try await client.execute(
                uri: "/console/escrows/\(ids[0])",
                method: .get,
                headers: browser.headers()
            )
            let requeued = try await client.execute(
                uri: "/console/escrows/\(ids[0])/requeue",
                method: .post,
                headers: browser.headers(form: true),
                body: Browser.form([("csrf", try #require(Browser.csrf(page))), ("reason", reason)])
            )
            let shown = try await browser.follow(requeued, client).text
            #expect(shown.contains("OPS-1 &quot;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&quot; &amp; &lt;b&gt;"))
            #expect(!shown.contains("<script") && !shown.contains("<b>"))
        }
        let events = try await harness.auditEvents()
        #expect(events.last { $0.draft.type == .requeued }?.draft.reason == reason, "stored as typed")
    }

    @Test("every page answers one policy: no unsafe source, nonce or hash; styles and scripts only from the service")
    func oneStrictPolicy() async throws {
        let policy = PagePolicy.contentSecurityPolicy
        for part in ["default-src 'none'", "style-src 'self';", "script-src 'self';", "frame-ancestors 'none'"] {
            #expect(policy.contains(part), "\(part)")
        }
        for unsafe in ["unsafe", "nonce-", "sha256-"] { #expect(!policy.contains(unsafe), "\(unsafe)") }
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            let (browser, _) = try await ConsoleTests.signIn("all", harness, client)
            for uri in [
                "/console/signin", "/console/", "/console/escrows", "/console/keys", "/console/tokens",
                "/console/purge-report", "/console/static/console.css",
                "/console/escrows/\(String(repeating: "0", count: 32))",
            ] {
                let page = try await client.execute(uri: uri, method: .get, headers: browser.headers())
                #expect(page.headers[.contentSecurityPolicy] == policy, "\(uri)")
                #expect(!page.text.contains("style=\"") && !page.text.contains("<style"), "\(uri): no inline style")
            }
            let report = try await client.execute(
                uri: "/v1/admin/purge-report?format=html",
                method: .get,
                headers: harness.headers("audit")
            )
            #expect(report.headers[.contentSecurityPolicy] == policy)
            #expect(report.text.contains("href=\"\(ConsolePages.stylesheetPath)\""), "the stylesheet, linked")
        }
    }

    @Test("no template carries an inline style or script; the console's purge report links back from its template")
    func templatesHoldNothingInline() async throws {
        let folder = try PageTemplates.locate()
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter {
            $0.hasSuffix(".mustache")
        }
        #expect(names.count == PageTemplates.templateNames.count)
        for name in names {
            let text = try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
            // `<script src=…>` (the 503 page's file) is the one script element.
            for inline in ["style=", "<style", "<script>", "javascript:"] where text.contains(inline) {
                Issue.record("\(name) holds \(inline)")
            }
            #expect(text.range(of: #" on[a-z]+="#, options: .regularExpression) == nil, "\(name): no event handler")
        }
        let harness = try await HTTPHarness()
        let report = try await PurgeReport.build(store: harness.store, verify: false)
        #expect(try report.html(for: .console).contains("<a href=\"/console/\">&#8592; Back to the console</a>"))
        #expect(try !report.html(for: .api).contains("Back to the console"))
        #expect(try report.html(for: .file).contains("href=\"data:text/css;base64,"), "a file carries its stylesheet")
    }

    @Test("templates missing: an error naming the folder looked in, never a crash")
    func missingTemplates() {
        let folder = URL(fileURLWithPath: "/nonexistent/ProfileEscrow_EscrowHTTP.resources/Pages")
        let error = #expect(throws: PageTemplates.Missing.self) { try PageTemplates(folder: folder) }
        #expect(error?.description.contains("/nonexistent/ProfileEscrow_EscrowHTTP.resources/Pages") == true)
    }

    @Test("the console's error page follows the failure's kind: a conflict is a 409, the store down a 503")
    func failuresByKind() {
        struct Failure: Error, ClassifiedFailure { var failureKind: FailureKind }
        for (kind, status) in [(FailureKind.conflict, 409), (.unavailable, 503), (.notFound, 404), (.internal, 500)] {
            #expect(ConsoleRoutes.failure(Failure(failureKind: kind), viewer: nil).status.code == status, "\(kind)")
        }
    }
}
