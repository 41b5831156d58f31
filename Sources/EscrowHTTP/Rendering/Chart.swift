import EscrowCore
import Foundation
import Mustache

/// The pages' one chart kit: the geometry of an inline SVG chart (horizontal bars, lines over time, stacked
/// columns), drawn by the `chart` template. Colours are palette indexes (`c0` … `c7` in the stylesheet), so no
/// element carries a style of its own.
struct Chart: Sendable {
    /// What a screen reader says of the chart.
    var label: String
    let width: Double
    let height: Double
    /// `0 0 width height`: stored, as the template reads stored properties only.
    let viewBox: String
    var lines: [Line] = []
    var bars: [Bar] = []
    var polylines: [Polyline] = []
    var dots: [Dot] = []
    var texts: [Text] = []

    init(label: String, width: Double, height: Double) {
        self.label = label
        self.width = width
        self.height = height
        viewBox = "0 0 \(Int(width)) \(Int(height))"
    }

    /// An axis or a gridline (`kind`: the stylesheet's `axis` or `grid`).
    struct Line: Sendable {
        var x1: String, y1: String, x2: String, y2: String
        var kind: String
    }

    /// A rectangle with its palette colour and, optionally, a tooltip.
    struct Bar: Sendable {
        var x: String, y: String, width: String, height: String
        var color: Int
        var tip: String?
    }

    struct Polyline: Sendable {
        var points: String
        var color: Int
    }

    struct Dot: Sendable {
        var cx: String, cy: String
        var color: Int
    }

    /// A label; `anchor` is the stylesheet's `end` or `middle`, or empty for the start.
    struct Text: Sendable {
        var x: String, y: String
        var text: String
        var anchor: String = ""
    }

    /// The number of palette colours (`c0` … `c7`).
    static let paletteSize = 8

    /// One decimal: enough for a pixel, short in the page.
    static func f(_ value: Double) -> String { String(format: "%.1f", value) }

    /// Horizontal bars, one a row, each labelled with its count.
    static func bars(_ label: String, _ rows: [(name: String, value: Int, color: Int)]) -> Chart? {
        guard !rows.isEmpty else { return nil }
        let labelWidth = 170.0
        let rowHeight = 24.0
        var chart = Chart(label: label, width: 520, height: rowHeight * Double(rows.count) + 8)
        let maximum = Double(max(rows.map(\.value).max() ?? 1, 1))
        for (index, row) in rows.enumerated() {
            let y = 4 + Double(index) * rowHeight
            let bar = max(1, (chart.width - labelWidth - 60) * Double(row.value) / maximum)
            chart.texts.append(Text(x: "0", y: f(y + 15), text: row.name))
            chart.bars.append(Bar(x: f(labelWidth), y: f(y + 3), width: f(bar), height: "16", color: row.color))
            chart.texts.append(Text(x: f(labelWidth + bar + 6), y: f(y + 15), text: "\(row.value)"))
        }
        return chart
    }

    /// Lines over time, one a series, a dot on each last value, with the first and last times under the axis.
    static func lines(_ label: String, times: [Date], series: [(values: [Int], color: Int)]) -> Chart? {
        guard let first = times.first, let last = times.last else { return nil }
        var chart = Chart(label: label, width: 1000, height: 180)
        let left = 50.0
        let bottom = chart.height - 24
        let span = max(last.timeIntervalSince(first), 1)
        let maximum = Double(max(series.flatMap(\.values).max() ?? 1, 1))
        func x(_ date: Date) -> Double { left + (chart.width - left - 10) * date.timeIntervalSince(first) / span }
        func y(_ value: Int) -> Double { 8 + (bottom - 8) * (1 - Double(value) / maximum) }
        chart.lines.append(Line(x1: f(left), y1: f(bottom), x2: f(chart.width - 10), y2: f(bottom), kind: "axis"))
        chart.texts += [
            Text(x: "0", y: "14", text: "\(Int(maximum))"), Text(x: "0", y: f(bottom), text: "0"),
            Text(x: f(left), y: f(chart.height - 6), text: Timestamp.seconds(first)),
            Text(x: f(chart.width - 10), y: f(chart.height - 6), text: Timestamp.seconds(last), anchor: "end"),
        ]
        for line in series {
            let points = zip(times, line.values).map { "\(f(x($0))),\(f(y($1)))" }
            chart.polylines.append(Polyline(points: points.joined(separator: " "), color: line.color))
            if let value = line.values.last {
                chart.dots.append(Dot(cx: f(x(last)), cy: f(y(value)), color: line.color))
            }
        }
        return chart
    }

    /// One column of ``columns(_:_:axis:height:countOnTop:)``: its stacked parts, bottom first.
    typealias Column = [(value: Int, color: Int, tip: String)]

    /// Vertical columns of stacked parts over a y axis of 4 gridlines, a label under some columns (`axis`, by
    /// column index), and each column's total over it when `countOnTop`.
    static func columns(
        _ label: String,
        _ columns: [Column],
        axis: [(index: Int, text: String)],
        height: Double,
        countOnTop: Bool = false
    ) -> Chart {
        var chart = Chart(label: label, width: 1000, height: height)
        let left = 50.0
        let top = 10.0
        let plotWidth = chart.width - left - 10
        let plotHeight = height - 30 - top
        let scale = gridCeiling(max(1, columns.map { $0.reduce(0) { $0 + $1.value } }.max() ?? 1))
        for step in 0...4 {
            let y = top + plotHeight - plotHeight * Double(step) / 4
            let kind = step == 0 ? "axis" : "grid"
            chart.lines.append(Line(x1: f(left), y1: f(y), x2: f(left + plotWidth), y2: f(y), kind: kind))
            chart.texts.append(Text(x: f(left - 6), y: f(y + 4), text: "\(scale * step / 4)", anchor: "end"))
        }
        let slot = plotWidth / Double(max(columns.count, 1))
        let barWidth = max(1, slot * 0.7)
        for (index, column) in columns.enumerated() {
            var y = top + plotHeight
            let x = left + Double(index) * slot + (slot - barWidth) / 2
            for part in column where part.value > 0 {
                let h = plotHeight * Double(part.value) / Double(scale)
                y -= h
                chart.bars.append(
                    Bar(x: f(x), y: f(y), width: f(barWidth), height: f(h), color: part.color, tip: part.tip)
                )
            }
            let total = column.reduce(0) { $0 + $1.value }
            if countOnTop, total > 0 {
                chart.texts.append(Text(x: f(x + barWidth / 2), y: f(y - 4), text: "\(total)", anchor: "middle"))
            }
        }
        for (index, text) in axis {
            let x = left + (Double(index) + 0.5) * slot
            chart.texts.append(Text(x: f(x), y: f(height - 10), text: text, anchor: "middle"))
        }
        return chart
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
}

// The template reads a chart's many small parts by name through `MustacheParent`, not through `Mirror`, which the
// renderer otherwise builds for every value it looks up: a page's rows and charts are where its time went.

extension Chart: MustacheParent {
    func child(named name: String) -> Any? {
        switch name {
        case "label": label
        case "viewBox": viewBox
        case "lines": lines
        case "bars": bars
        case "polylines": polylines
        case "dots": dots
        case "texts": texts
        default: nil
        }
    }
}

extension Chart.Line: MustacheParent {
    func child(named name: String) -> Any? {
        switch name {
        case "x1": x1
        case "y1": y1
        case "x2": x2
        case "y2": y2
        case "kind": kind
        default: nil
        }
    }
}

extension Chart.Bar: MustacheParent {
    func child(named name: String) -> Any? {
        switch name {
        case "x": x
        case "y": y
        case "width": width
        case "height": height
        case "color": color
        case "hasTip": tip != nil
        case "tip": tip ?? ""
        default: nil
        }
    }
}

extension Chart.Polyline: MustacheParent {
    func child(named name: String) -> Any? {
        switch name {
        case "points": points
        case "color": color
        default: nil
        }
    }
}

extension Chart.Dot: MustacheParent {
    func child(named name: String) -> Any? {
        switch name {
        case "cx": cx
        case "cy": cy
        case "color": color
        default: nil
        }
    }
}

extension Chart.Text: MustacheParent {
    func child(named name: String) -> Any? {
        switch name {
        case "x": x
        case "y": y
        case "text": text
        case "anchor": anchor
        default: nil
        }
    }
}
