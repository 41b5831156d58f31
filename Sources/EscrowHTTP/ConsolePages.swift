import EscrowCore
import EscrowCrypto
import Foundation
import HTTPTypes
import Hummingbird
import ProfileEscrow

/// The console's HTML, written by hand: every value that is not a constant of this file goes through ``escape(_:)``.
/// No script, no external resource: one stylesheet served by the console itself, charts as inline SVG with
/// presentation attributes (no `style` attribute), so the Content-Security-Policy needs no `unsafe-inline`.
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

    // MARK: Responses

    /// The headers of every console answer: a strict policy (styles from the console's own stylesheet, or the hashes
    /// given), no framing, no caching, no referrer.
    static func securityHeaders(styleHashes: [String] = []) -> HTTPFields {
        let styles =
            styleHashes.isEmpty
            ? "'self'" : "'self' 'unsafe-hashes' " + styleHashes.map { "'sha256-\($0)'" }.joined(separator: " ")
        return [
            .contentSecurityPolicy:
                "default-src 'none'; style-src \(styles); img-src 'self' data:; form-action 'self'; "
                + "frame-ancestors 'none'; base-uri 'none'",
            .cacheControl: "no-store",
            // same-origin, not no-referrer: with no-referrer a browser sends `Origin: null` on its own form posts.
            .referrerPolicy: "same-origin",
            HTTPField.Name("X-Content-Type-Options")!: "nosniff",
            HTTPField.Name("X-Frame-Options")!: "DENY",
            HTTPField.Name("Cross-Origin-Opener-Policy")!: "same-origin",
        ]
    }

    /// The base64 SHA-256 of each `<style>` element's text and each `style="…"` attribute of a document that has them
    /// (the purge report's HTML): the policy allows exactly those.
    static func styleHashes(of html: String) -> [String] {
        var found: Set<String> = []
        func collect(_ open: String, _ close: String) {
            var rest = html[...]
            while let start = rest.range(of: open) {
                let after = rest[start.upperBound...]
                guard let end = after.range(of: close) else { break }
                found.insert(String(after[..<end.lowerBound]))
                rest = after[end.upperBound...]
            }
        }
        collect("<style>", "</style>")
        collect("style=\"", "\"")
        return found.sorted().map { Data(Hashing.sha256(Array($0.utf8))).base64EncodedString() }
    }

    static func response(
        _ status: HTTPResponse.Status,
        _ html: String,
        headers extra: HTTPFields = [:]
    ) -> Response {
        var headers = securityHeaders()
        headers[.contentType] = "text/html; charset=utf-8"
        for field in extra { headers.append(field) }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    static func redirect(_ location: String, headers extra: HTTPFields = [:]) -> Response {
        var headers = securityHeaders()
        headers[.location] = location
        for field in extra { headers.append(field) }
        return Response(status: .seeOther, headers: headers)
    }

    // MARK: Layout

    static func escape(_ text: String) -> String { HTMLEscaping.escape(text) }

    /// Query-string escaping of a value (RFC 3986 unreserved characters kept).
    static func query(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    static func page(title: String, viewer: Viewer?, body: String) -> String {
        var nav = ""
        if let viewer {
            var links: [(String, String)] = []
            if viewer.may(.read) {
                links += [("/console/", "Overview"), ("/console/escrows", "Escrows"), ("/console/keys", "Keys")]
            }
            if viewer.may(.audit) { links.append(("/console/purge-report", "Purge report")) }
            // Every token's name and scopes: for operators only.
            if viewer.may(.operate) { links.append(("/console/tokens", "Tokens")) }
            nav =
                "<nav>" + links.map { "<a href=\"\($0.0)\">\(escape($0.1))</a>" }.joined()
                + "<span class=\"who\">\(escape(viewer.name)) · \(escape(viewer.role))</span>"
                + "<form method=\"post\" action=\"/console/signout\" class=\"inline\">\(csrfField(viewer))"
                + "<button type=\"submit\">Sign out</button></form></nav>"
        }
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(escape(title)) · ProfileEscrow console</title>
            <link rel="stylesheet" href="\(stylesheetPath)"></head>
            <body><header><span class="brand">ProfileEscrow</span>\(nav)</header>
            <main><h1>\(escape(title))</h1>
            \(body)
            </main>
            <footer>Counts, random escrow ids, codes and operator reasons only: no name, email or user identifier is shown
            here.</footer></body></html>

            """
    }

    static func csrfField(_ viewer: Viewer) -> String {
        "<input type=\"hidden\" name=\"csrf\" value=\"\(escape(viewer.csrf))\">"
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
        return response(
            status,
            page(
                title: title,
                viewer: viewer,
                body: "<p class=\"error\" id=\"error\">\(escape(message))</p><p><a href=\"/console/\">Back</a></p>"
            )
        )
    }

    // MARK: Sign-in

    static func signIn(csrf: String, message: String? = nil) -> String {
        let note = message.map { "<p class=\"error\" id=\"error\">\(escape($0))</p>" } ?? ""
        return page(
            title: "Sign in",
            viewer: nil,
            body: """
                \(note)
                <p>Paste a bearer token of this service. Its scopes are your role: <code>read</code> a viewer,
                <code>operate</code> and <code>erase</code> an operator, <code>audit</code> an auditor.</p>
                <form method="post" action="/console/signin" autocomplete="off">
                <input type="hidden" name="csrf" value="\(escape(csrf))">
                <label>Token <input type="password" name="token" id="token" required maxlength="256"></label>
                <button type="submit" id="signin">Sign in</button></form>
                """
        )
    }

    // MARK: Charts

    /// Horizontal bars, one a row, labelled with the count: inline SVG with presentation attributes only.
    static func barChart(_ label: String, _ rows: [(name: String, value: Int, color: String)]) -> String {
        guard !rows.isEmpty else { return "<p class=\"muted\">None.</p>" }
        let width = 520.0
        let labelWidth = 170.0
        let rowHeight = 24.0
        let height = rowHeight * Double(rows.count) + 8
        let maximum = Double(max(rows.map(\.value).max() ?? 1, 1))
        var svg =
            "<svg viewBox=\"0 0 \(Int(width)) \(Int(height))\" width=\"100%\" role=\"img\" "
            + "aria-label=\"\(escape(label))\" xmlns=\"http://www.w3.org/2000/svg\">"
        for (index, row) in rows.enumerated() {
            let y = 4 + Double(index) * rowHeight
            let bar = max(1, (width - labelWidth - 60) * Double(row.value) / maximum)
            svg += "<text x=\"0\" y=\"\(Int(y + 15))\" font-size=\"12\" fill=\"#333\">\(escape(row.name))</text>"
            svg +=
                "<rect x=\"\(Int(labelWidth))\" y=\"\(Int(y + 3))\" width=\"\(Int(bar))\" height=\"16\" rx=\"2\" "
                + "fill=\"\(escape(row.color))\"/>"
            svg +=
                "<text x=\"\(Int(labelWidth + bar + 6))\" y=\"\(Int(y + 15))\" font-size=\"12\" fill=\"#333\">"
                + "\(row.value)</text>"
        }
        return svg + "</svg>"
    }

    /// Lines over time (the backlog's history), one a series, with the first and last times under the axis: inline
    /// SVG with presentation attributes only.
    static func lineChart(
        _ label: String,
        times: [Date],
        series: [(name: String, values: [Int], color: String)]
    ) -> String {
        guard let first = times.first, let last = times.last else { return "<p class=\"muted\">Not yet.</p>" }
        let width = 1000.0
        let height = 180.0
        let left = 50.0
        let bottom = 24.0
        let span = max(last.timeIntervalSince(first), 1)
        let maximum = Double(max(series.flatMap(\.values).max() ?? 1, 1))
        func x(_ date: Date) -> Double { left + (width - left - 10) * date.timeIntervalSince(first) / span }
        func y(_ value: Int) -> Double { 8 + (height - bottom - 8) * (1 - Double(value) / maximum) }
        var svg =
            "<svg viewBox=\"0 0 \(Int(width)) \(Int(height))\" width=\"100%\" role=\"img\" "
            + "aria-label=\"\(escape(label))\" xmlns=\"http://www.w3.org/2000/svg\">"
        svg +=
            "<line x1=\"\(Int(left))\" y1=\"\(Int(height - bottom))\" x2=\"\(Int(width - 10))\" "
            + "y2=\"\(Int(height - bottom))\" stroke=\"#bbb\"/>"
        svg += "<text x=\"0\" y=\"14\" font-size=\"12\" fill=\"#555\">\(Int(maximum))</text>"
        svg += "<text x=\"0\" y=\"\(Int(height - bottom))\" font-size=\"12\" fill=\"#555\">0</text>"
        svg +=
            "<text x=\"\(Int(left))\" y=\"\(Int(height - 6))\" font-size=\"12\" fill=\"#555\">"
            + "\(escape(Timestamp.seconds(first)))</text>"
        svg +=
            "<text x=\"\(Int(width - 10))\" y=\"\(Int(height - 6))\" font-size=\"12\" fill=\"#555\" "
            + "text-anchor=\"end\">\(escape(Timestamp.seconds(last)))</text>"
        for line in series {
            let points = zip(times, line.values).map { "\(Int(x($0))),\(Int(y($1)))" }.joined(separator: " ")
            svg +=
                "<polyline points=\"\(points)\" fill=\"none\" stroke=\"\(escape(line.color))\" "
                + "stroke-width=\"2\"/>"
            if let time = times.last, let value = line.values.last {
                svg += "<circle cx=\"\(Int(x(time)))\" cy=\"\(Int(y(value)))\" r=\"3\" fill=\"\(escape(line.color))\"/>"
            }
        }
        return svg + "</svg>"
    }

    static let palette = ["#1565c0", "#2e7d32", "#ef6c00", "#c62828", "#6a1b9a", "#00838f", "#78909c", "#5d4037"]

    static func colored(_ counts: [String: Int]) -> [(name: String, value: Int, color: String)] {
        counts.sorted { $0.key < $1.key }.enumerated().map { index, entry in
            (entry.key, entry.value, palette[index % palette.count])
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

    static let stylesheet = """
        body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1d1d1f;margin:0;\
        background:#fafafa}
        header{display:flex;align-items:center;gap:18px;background:#1d2733;color:#fff;padding:10px 24px}
        header a{color:#cfe3ff;text-decoration:none;margin-right:14px}header a:hover{text-decoration:underline}
        .brand{font-weight:700;margin-right:10px}nav{display:flex;align-items:center;flex:1}
        .who{margin-left:auto;margin-right:12px;color:#dde;font-size:13px}
        main{max-width:1100px;margin:0 auto;padding:16px 28px}h1{font-size:24px}h2{font-size:18px;margin-top:26px}
        .cards{display:grid;grid-template-columns:repeat(4,1fr);gap:12px}
        .card{background:#fff;border:1px solid #ddd;border-radius:8px;padding:10px 14px}
        .card .label{font-size:12px;color:#666;text-transform:uppercase;letter-spacing:.04em}
        .card .value{font-size:24px;font-weight:600}
        .grid{display:grid;grid-template-columns:1fr 1fr;gap:24px}
        table{border-collapse:collapse;width:100%;font-size:14px;background:#fff}
        th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #eee}td.n,th.n{text-align:right}
        code,.id{font-family:"DejaVu Sans Mono",monospace;font-size:12px}
        form.filters{display:flex;flex-wrap:wrap;gap:10px;align-items:end;background:#fff;padding:10px;\
        border:1px solid #ddd;border-radius:8px}
        form.filters label{display:flex;flex-direction:column;font-size:12px;color:#555}
        form.action{background:#fff;border:1px solid #ddd;border-radius:8px;padding:10px;margin:10px 0}
        form.inline{display:inline}input,select,button{font-size:14px;padding:4px 6px}
        button.danger{background:#c62828;color:#fff;border:1px solid #8e0000}
        .error{color:#c62828;font-weight:600}.ok{color:#2e7d32;font-weight:600}.muted{color:#777}
        .legend span{margin-right:14px;font-size:13px;font-weight:600}.legend .pending{color:#1565c0}\
        .legend .dead{color:#c62828}
        .pager{margin:12px 0}footer{max-width:1100px;margin:24px auto;padding:0 28px;color:#777;font-size:12px}
        """
}
