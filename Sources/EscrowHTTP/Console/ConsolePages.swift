import EscrowCore
import Foundation
import HTTPTypes
import Hummingbird
import Mustache

/// The console's pages: each a `console-…` template filling the `console` frame, over a plain struct of the page's
/// values (``Frame``). Mustache escapes every value; the templates carry no script and no style of their own, so
/// ``PagePolicy`` needs no unsafe source.
enum ConsolePages {
    /// Who is signed in: the token's name and scopes (the role).
    struct Viewer: Sendable {
        var name: String
        var scopes: Set<AccessTokenScope>
        var csrf: String

        func may(_ scope: AccessTokenScope) -> Bool { scopes.contains(scope) }

        var role: String {
            var roles: [String] = []
            if may(.operate) || may(.erase) { roles.append("operator") } else if may(.read) { roles.append("viewer") }
            if may(.audit) { roles.append("auditor") }
            return roles.isEmpty ? "no console role" : roles.joined(separator: ", ")
        }
    }

    static let stylesheetPath = "/console/static/console.css"

    /// What the `console` frame reads: the page's title, the signed-in viewer's navigation, and the page's own values.
    struct Frame<Page> {
        var title: String
        var viewer: Navigation?
        var page: Page
    }

    /// The header's links (by role), the viewer's name and role, the CSRF token of every form, and what the role may.
    struct Navigation {
        struct Link {
            var href: String
            var text: String
        }

        var name: String
        var role: String
        var csrf: String
        var links: [Link]
        var operates: Bool
        var erases: Bool
        var audits: Bool

        init(_ viewer: Viewer) {
            name = viewer.name
            role = viewer.role
            csrf = viewer.csrf
            operates = viewer.may(.operate)
            erases = viewer.may(.erase)
            audits = viewer.may(.audit)
            links = []
            if viewer.may(.read) {
                links += [
                    Link(href: "/console/", text: "Overview"), Link(href: "/console/escrows", text: "Escrows"),
                    Link(href: "/console/keys", text: "Keys"),
                    Link(href: "/console/notifications", text: "Notifications"),
                ]
            }
            if audits { links.append(Link(href: "/console/purge-report", text: "Purge report")) }
            // Every token's name and scopes: for operators only.
            if operates { links.append(Link(href: "/console/tokens", text: "Tokens")) }
        }
    }

    /// `console-message`'s values: one line of `kind` (`error`, `ok`, `muted`) under `id`, and a link on.
    struct Message {
        var kind: String
        var id: String
        var text: String
        var link = "/console/"
        var linkText = "Back"
    }

    // MARK: Responses

    /// The headers of every console answer: ``PagePolicy``'s policy, no framing, no caching, no referrer elsewhere.
    static let securityHeaders: HTTPFields = [
        .contentSecurityPolicy: PagePolicy.contentSecurityPolicy,
        .cacheControl: "no-store",
        // same-origin, not no-referrer: with no-referrer a browser sends `Origin: null` on its own form posts.
        .referrerPolicy: "same-origin",
        HTTPField.Name("X-Content-Type-Options")!: "nosniff",
        HTTPField.Name("X-Frame-Options")!: "DENY",
        HTTPField.Name("Cross-Origin-Opener-Policy")!: "same-origin",
    ]

    /// `template` over `page` in the console's frame; a `500` saying the templates are missing when they are.
    static func render(
        _ template: String,
        title: String,
        viewer: Viewer?,
        _ page: some Any,
        status: HTTPResponse.Status = .ok,
        headers: HTTPFields = [:]
    ) -> Response {
        let frame = Frame(title: title, viewer: viewer.map(Navigation.init), page: page)
        return response(status, { $0.render(template, frame) }, headers: headers)
    }

    /// A page made by `make` from the templates, with the console's headers (and `extra`).
    static func response(
        _ status: HTTPResponse.Status,
        _ make: (PageTemplates) -> String,
        type: String = "text/html; charset=utf-8",
        headers extra: HTTPFields = [:]
    ) -> Response {
        var headers = securityHeaders
        for field in extra { headers.append(field) }
        return PageTemplates.response(status, headers: headers, type: type, make)
    }

    /// An answer already rendered (a held page).
    static func response(_ status: HTTPResponse.Status, html: String) -> Response {
        var headers = securityHeaders
        headers[.contentType] = "text/html; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    static func redirect(_ location: String, headers extra: HTTPFields = [:]) -> Response {
        var headers = securityHeaders
        headers[.location] = location
        for field in extra { headers.append(field) }
        return Response(status: .seeOther, headers: headers)
    }

    static func errorPage(_ status: HTTPResponse.Status, _ message: String, viewer: Viewer?) -> Response {
        let title =
            switch status.code {
            case 403: "Not allowed"
            case 404: "Not found"
            case 400: "Bad request"
            case 410: "Already shown"
            default: status.reasonPhrase
            }
        return render(
            "console-message",
            title: title,
            viewer: viewer,
            Message(kind: "error", id: "error", text: message),
            status: status
        )
    }

    // MARK: Values

    /// Query-string escaping of a value (RFC 3986 unreserved characters kept).
    static func query(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    /// Counts by name, sorted, each with the next palette colour.
    static func colored(_ counts: [String: Int]) -> [(name: String, value: Int, color: Int)] {
        counts.sorted { $0.key < $1.key }.enumerated().map { index, entry in
            (entry.key, entry.value, index % Chart.paletteSize)
        }
    }

    static func age(_ seconds: Int?) -> String {
        guard let seconds else { return "-" }
        if seconds < 120 { return "\(seconds) s" }
        if seconds < 7200 { return "\(seconds / 60) min" }
        if seconds < 172_800 { return "\(seconds / 3600) h" }
        return "\(seconds / 86_400) d"
    }

    static func time(_ date: Date?) -> String { date.map(Timestamp.seconds) ?? "-" }
}

/// A summary card of the `cards` template (the console's overview, the purge report): a label over a value; `kind`
/// colours it (`ok`, `bad`, `none`).
struct Card: MustacheParent {
    var label: String
    var value: String
    var kind = ""
    var id: String?

    func child(named name: String) -> Any? {
        switch name {
        case "label": label
        case "value": value
        case "kind": kind
        case "hasID": id != nil
        case "id": id ?? ""
        default: nil
        }
    }
}
