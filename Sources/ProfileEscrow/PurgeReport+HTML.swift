import EscrowCore
import EscrowCrypto
import Foundation

extension PurgeReport {
    /// A self-contained HTML document for an auditor: the summary, purges by reason over time and the
    /// time-to-purge distribution as inline SVG charts, the retention setting, live and dead escrows and the
    /// chain verification. No script, no external font, stylesheet or image: it opens offline and prints.
    public func html() -> String {
        var body = ""
        body += "<header><h1>ProfileEscrow purge report</h1>"
        body += "<p class=\"period\">Period \(Self.escape(since.map(Timestamp.seconds) ?? "beginning of the trail"))"
        body += " to \(Self.escape(until.map(Timestamp.seconds) ?? "now")) · generated "
        body += "\(Self.escape(Timestamp.seconds(generatedAt))) · retention "
        body += "\(Self.escape(retentionSeconds.map(Self.whole) ?? "not given"))</p></header>"
        body += summaryCards()
        body += "<section><h2>Purges by reason over time</h2>\(reasonsOverTimeChart())</section>"
        body += "<section><h2>Time from capture to purge</h2>\(distributionChart())</section>"
        body += "<section class=\"columns\">\(reasonTable())\(liveTable())</section>"
        body += deadSection()
        body += chainSection()
        body += "<footer>Counts, durations, random escrow ids and codes only: this report holds no name, email or "
        body += "user identifier.</footer>"
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>ProfileEscrow purge report</title>
            <style>\(Self.style)</style></head>
            <body>\(body)</body></html>

            """
    }

    static let reasonColors: [PurgeReason: String] = [
        .confirmed: "#2e7d32", .expired: "#ef6c00", .revoked: "#6a1b9a", .accountDeleted: "#c62828",
        .erased: "#1565c0", .replaced: "#78909c",
    ]

    static let style = """
        body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1d1d1f;\
        margin:0 auto;max-width:1080px;padding:24px 32px;background:#fff}
        h1{font-size:26px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px}
        .period{color:#555;margin:0 0 16px}
        .cards{display:grid;grid-template-columns:repeat(4,1fr);gap:12px}
        .card{border:1px solid #ddd;border-radius:8px;padding:10px 14px}
        .card .label{font-size:12px;color:#666;text-transform:uppercase;letter-spacing:.04em}
        .card .value{font-size:24px;font-weight:600;margin-top:2px}
        .card.ok{border-color:#2e7d32;background:#f1f8f1}.card.bad{border-color:#c62828;background:#fdf0f0}
        .card.none{background:#f6f6f6}
        table{border-collapse:collapse;width:100%;font-size:14px}
        th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eee}td.n,th.n{text-align:right}
        .columns{display:grid;grid-template-columns:1fr 1fr;gap:32px}
        .legend span{display:inline-block;margin-right:14px;font-size:13px}
        .legend i{display:inline-block;width:11px;height:11px;margin-right:5px;vertical-align:-1px}
        code{font-family:"DejaVu Sans Mono",monospace;font-size:12px}
        .verdict{font-size:16px;font-weight:600}.verdict.ok{color:#2e7d32}.verdict.bad{color:#c62828}
        footer{margin-top:32px;color:#777;font-size:12px}
        svg text{font-family:inherit;font-size:11px;fill:#444}
        """

    private func summaryCards() -> String {
        func card(_ label: String, _ value: String, _ kind: String = "") -> String {
            "<div class=\"card \(kind)\"><div class=\"label\">\(Self.escape(label))</div>"
                + "<div class=\"value\">\(Self.escape(value))</div></div>"
        }
        let chainCard: String
        switch chain {
        case .none: chainCard = card("Audit chain", "not checked", "none")
        case .some(let chain) where chain.verified: chainCard = card("Audit chain", "verified", "ok")
        case .some(let chain):
            chainCard = card("Audit chain", "broken at \(chain.firstBrokenSequence.map(String.init) ?? "?")", "bad")
        }
        func duration(_ value: Double?) -> String { value.map(Self.human) ?? "-" }
        return "<div class=\"cards\">"
            + card("Captured", "\(captured)")
            + card("Purged", "\(purged.values.reduce(0, +))")
            + card("Live now", "\(live.values.reduce(0, +))")
            + card("Overdue", "\(overdue)", overdue > 0 ? "bad" : "ok")
            + card("Median time to purge", duration(timeToPurgeSeconds?.median))
            + card("p95 time to purge", duration(timeToPurgeSeconds?.p95))
            + card("Longest time to purge", duration(timeToPurgeSeconds?.max))
            + chainCard
            + "</div>"
    }

    /// Stacked bars of purges by reason: one bar an hour for up to 3 days, a day for up to 90 days, else a week.
    private func reasonsOverTimeChart() -> String {
        guard let first = hourly.first?.hour, let last = hourly.last?.hour else {
            return "<p>No purge in this period.</p>"
        }
        let span = last.timeIntervalSince(first)
        let step: Double = span <= 72 * 3600 ? 3600 : span <= 90 * 86_400 ? 86_400 : 7 * 86_400
        let start = (first.timeIntervalSince1970 / step).rounded(.down) * step
        let count = Int(((last.timeIntervalSince1970 - start) / step).rounded(.down)) + 1
        var bars = Array(repeating: [PurgeReason: Int](), count: count)
        for entry in hourly {
            let index = Int(((entry.hour.timeIntervalSince1970 - start) / step).rounded(.down))
            for (reason, n) in entry.purged { bars[index][reason, default: 0] += n }
        }
        let width = 1000.0
        let height = 260.0
        let left = 50.0
        let bottom = 30.0
        let plotWidth = width - left - 10
        let plotHeight = height - bottom - 10
        let maximum = max(1, bars.map { $0.values.reduce(0, +) }.max() ?? 1)
        let scale = Self.gridCeiling(maximum)
        let slot = plotWidth / Double(count)
        let barWidth = max(1, slot * 0.8)
        var svg = "<svg viewBox=\"0 0 \(Int(width)) \(Int(height))\" width=\"100%\" role=\"img\" "
        svg += "aria-label=\"Purges by reason over time\" xmlns=\"http://www.w3.org/2000/svg\">"
        svg += axes(left: left, top: 10, plotWidth: plotWidth, plotHeight: plotHeight, scale: scale)
        for (index, bar) in bars.enumerated() {
            var y = 10 + plotHeight
            let x = left + Double(index) * slot + (slot - barWidth) / 2
            for reason in PurgeReason.allCases {
                guard let n = bar[reason], n > 0 else { continue }
                let h = plotHeight * Double(n) / Double(scale)
                y -= h
                svg += "<rect x=\"\(Self.f(x))\" y=\"\(Self.f(y))\" width=\"\(Self.f(barWidth))\" "
                svg += "height=\"\(Self.f(h))\" fill=\"\(Self.reasonColors[reason] ?? "#999")\">"
                svg += "<title>\(reason.rawValue): \(n)</title></rect>"
            }
        }
        // Up to 8 time labels along the axis.
        let labelEvery = max(1, Int((Double(count) / 8).rounded(.up)))
        for index in stride(from: 0, to: count, by: labelEvery) {
            let date = Date(timeIntervalSince1970: start + Double(index) * step)
            let text =
                step < 86_400
                ? Timestamp.seconds(date).prefix(16).replacingOccurrences(of: "T", with: " ")
                : String(Timestamp.seconds(date).prefix(10))
            let x = left + (Double(index) + 0.5) * slot
            svg += "<text x=\"\(Self.f(x))\" y=\"\(Self.f(height - 10))\" text-anchor=\"middle\">\(text)</text>"
        }
        svg += "</svg>"
        let unit = step == 3600 ? "hour" : step == 86_400 ? "day" : "week"
        var legend = "<div class=\"legend\">"
        for reason in PurgeReason.allCases {
            legend +=
                "<span><i style=\"background:\(Self.reasonColors[reason] ?? "#999")\"></i>\(reason.rawValue)</span>"
        }
        legend += "<span>(one bar a \(unit), UTC)</span></div>"
        return svg + legend
    }

    /// Bars of purges per time-to-purge bucket.
    private func distributionChart() -> String {
        let buckets = distribution
        guard buckets.contains(where: { $0.count > 0 }) else { return "<p>No purge in this period.</p>" }
        let labels =
            Self.timeToPurgeBuckets.map { "≤ " + Self.whole($0) } + ["> " + Self.whole(Self.timeToPurgeBuckets.last!)]
        let width = 1000.0
        let height = 220.0
        let left = 50.0
        let bottom = 30.0
        let plotWidth = width - left - 10
        let plotHeight = height - bottom - 10
        let scale = Self.gridCeiling(max(1, buckets.map(\.count).max() ?? 1))
        let slot = plotWidth / Double(buckets.count)
        var svg = "<svg viewBox=\"0 0 \(Int(width)) \(Int(height))\" width=\"100%\" role=\"img\" "
        svg += "aria-label=\"Time to purge distribution\" xmlns=\"http://www.w3.org/2000/svg\">"
        svg += axes(left: left, top: 10, plotWidth: plotWidth, plotHeight: plotHeight, scale: scale)
        for (index, bucket) in buckets.enumerated() {
            let h = plotHeight * Double(bucket.count) / Double(scale)
            let x = left + Double(index) * slot + slot * 0.15
            let y = 10 + plotHeight - h
            svg +=
                "<rect x=\"\(Self.f(x))\" y=\"\(Self.f(y))\" width=\"\(Self.f(slot * 0.7))\" height=\"\(Self.f(h))\" "
            svg += "fill=\"#1565c0\"><title>\(Self.escape(labels[index])): \(bucket.count)</title></rect>"
            if bucket.count > 0 {
                svg += "<text x=\"\(Self.f(x + slot * 0.35))\" y=\"\(Self.f(y - 4))\" text-anchor=\"middle\">"
                svg += "\(bucket.count)</text>"
            }
            svg += "<text x=\"\(Self.f(x + slot * 0.35))\" y=\"\(Self.f(height - 10))\" text-anchor=\"middle\">"
            svg += "\(Self.escape(labels[index]))</text>"
        }
        return svg + "</svg>"
    }

    /// The y axis with 4 gridlines, and the x axis.
    private func axes(left: Double, top: Double, plotWidth: Double, plotHeight: Double, scale: Int) -> String {
        var svg = ""
        for step in 0...4 {
            let value = scale * step / 4
            let y = top + plotHeight - plotHeight * Double(step) / 4
            svg += "<line x1=\"\(Self.f(left))\" x2=\"\(Self.f(left + plotWidth))\" y1=\"\(Self.f(y))\" "
            svg += "y2=\"\(Self.f(y))\" stroke=\"\(step == 0 ? "#888" : "#e4e4e4")\"/>"
            svg += "<text x=\"\(Self.f(left - 6))\" y=\"\(Self.f(y + 4))\" text-anchor=\"end\">\(value)</text>"
        }
        return svg
    }

    private func reasonTable() -> String {
        var html = "<div><h2>Purged by reason</h2><table><tr><th>reason</th><th class=\"n\">purges</th></tr>"
        for reason in PurgeReason.allCases {
            html += "<tr><td><i style=\"display:inline-block;width:10px;height:10px;margin-right:6px;background:"
            html += "\(Self.reasonColors[reason] ?? "#999")\"></i>\(reason.rawValue)</td>"
            html += "<td class=\"n\">\(purged[reason] ?? 0)</td></tr>"
        }
        return html + "</table></div>"
    }

    private func liveTable() -> String {
        var html = "<div><h2>Live escrows now</h2><table><tr><th>state</th><th class=\"n\">escrows</th></tr>"
        for state in EscrowState.live {
            html += "<tr><td>\(state.rawValue)</td><td class=\"n\">\(live[state] ?? 0)</td></tr>"
        }
        html += "<tr><td>oldest live escrow's age</td><td class=\"n\">"
        html += "\(Self.escape(oldestLiveAgeSeconds.map(Self.human) ?? "-"))</td></tr>"
        html += "<tr><td>overdue (past retention, not purged)</td><td class=\"n\">\(overdue)</td></tr>"
        return html + "</table></div>"
    }

    private func deadSection() -> String {
        var html = "<section><h2>Dead escrows (\(dead.count))</h2>"
        guard !dead.isEmpty else {
            return html + "<p>None: every delivery ended or is still being tried.</p></section>"
        }
        html += "<p>Delivery was given up; each stays until an operator requeues it or retention purges it.</p>"
        html += "<table><tr><th>escrow id</th><th>code</th></tr>"
        for entry in dead.prefix(200) {
            html +=
                "<tr><td><code>\(Self.escape(entry.idHex))</code></td><td>\(Self.escape(entry.code?.rawValue ?? "-"))</td></tr>"
        }
        if dead.count > 200 { html += "<tr><td colspan=\"2\">… \(dead.count - 200) more in the JSON form</td></tr>" }
        return html + "</table></section>"
    }

    private func chainSection() -> String {
        var html = "<section><h2>Audit chain</h2>"
        if let archive {
            let verdict = archive.uncoveredSequences == nil && archive.problems.isEmpty ? "" : " bad"
            html += "<p class=\"verdict\(verdict)\">Archive: \(Self.escape(archive.sentence))</p>"
            for problem in archive.problems { html += "<p class=\"verdict bad\">\(Self.escape(problem))</p>" }
        }
        if let chain, chain.fromSequence > 1 {
            html += "<p>The store's chain is verified from sequence \(chain.fromSequence), after its checkpoint; "
            html += "the events before it are in archived segments (<code>profile-escrow audit verify</code>).</p>"
        }
        guard let chain else {
            return html
                + "<p class=\"verdict\">Not checked: generate the report with <code>--verify</code>.</p></section>"
        }
        if chain.verified {
            html += "<p class=\"verdict ok\">Verified: every one of the \(chain.events) events links to the one "
            html += "before it.</p>"
            html += "<p>Head hash <code>\(Self.escape(chain.headHash ?? "-"))</code>: compare it with a copy kept "
            html += "elsewhere to detect a rewritten trail.</p>"
        } else {
            html += "<p class=\"verdict bad\">Broken at sequence "
            html += "\(chain.firstBrokenSequence.map(String.init) ?? "?") (\(chain.events) events read): the trail "
            html += "was altered or truncated there.</p>"
        }
        return html + "</section>"
    }

    /// 1, 2 or 5 times a power of ten, at least `value`.
    static func niceCeiling(_ value: Int) -> Int {
        var power = 1
        while true {
            for factor in [1, 2, 5] where factor * power >= value { return factor * power }
            power *= 10
        }
    }

    /// The axis maximum: 4 gridlines of a round whole step (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power
    /// of ten).
    static func gridCeiling(_ value: Int) -> Int {
        let step = max(1, (value + 3) / 4)
        var power = 1
        while true {
            for tenths in [10, 12, 15, 20, 25, 30, 40, 50, 60, 80] where tenths * power % 10 == 0 {
                if tenths * power / 10 >= step { return tenths * power / 10 * 4 }
            }
            power *= 10
        }
    }

    /// A bound in its largest whole unit: `1 s`, `10 min`, `7 days`, else ``human(_:)``.
    static func whole(_ seconds: Double) -> String {
        for (unit, name) in [(86_400.0, "d"), (3600, "h"), (60, "min"), (1, "s")]
        where seconds >= unit && (seconds / unit).rounded() == seconds / unit {
            let count = Int(seconds / unit)
            return name == "d" ? "\(count) day\(count == 1 ? "" : "s")" : "\(count) \(name)"
        }
        return human(seconds)
    }

    static func f(_ value: Double) -> String { String(format: "%.1f", value) }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
