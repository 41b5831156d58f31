import ArgumentParser
import EscrowCore
import Foundation
import Logging
import NIOConcurrencyHelpers

/// `--log-format`: one JSON object a line (the default of `serve` and `replay`, for log pipelines) or
/// logfmt-style text for a terminal.
enum LogFormat: String, ExpressibleByArgument, CaseIterable, Sendable {
    case text, json
}

/// `--log-level`: swift-log's levels by their names.
struct LogLevelOption: ExpressibleByArgument, Sendable {
    var level: Logger.Level

    init(_ level: Logger.Level) { self.level = level }

    init?(argument: String) {
        guard let level = Logger.Level(rawValue: argument.lowercased()) else { return nil }
        self.level = level
    }

    static var allValueStrings: [String] { Logger.Level.allCases.map(\.rawValue) }
}

/// Writes log lines to standard error, one `write` a line under a lock, so lines from many threads never
/// interleave.
///
/// swift-log ships only a text `StreamLogHandler` (values unquoted, so logfmt parsers break on spaces) and no JSON
/// handler; the libraries that add one bring their own dependency trees for a few dozen lines.
struct LogOutput: LogHandler {
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level
    var metadataProvider: Logger.MetadataProvider?
    let label: String
    let format: LogFormat

    private static let lock = NIOLock()

    init(label: String, format: LogFormat, level: Logger.Level) {
        self.label = label
        self.format = format
        self.logLevel = level
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let metadata = event.metadata { merged.merge(metadata) { _, new in new } }
        let line: String
        switch format {
        case .json:
            line = Self.json(date: Date(), level: event.level, label: label, message: "\(event.message)", merged)
        case .text:
            line = Self.text(date: Date(), level: event.level, label: label, message: "\(event.message)", merged)
        }
        let bytes = Array((line + "\n").utf8)
        Self.lock.withLock {
            bytes.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = write(STDERR_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
                    if written <= 0 { if errno == EINTR { continue } else { return } }
                    offset += written
                }
            }
        }
    }

    /// `{"time": …, "level": …, "logger": …, "message": …, <metadata>…}`: these four keys always, in this order;
    /// metadata keys as the code names them (`escrow.id`, `http.status`, `duration.ms`), nested values as
    /// JSON arrays and objects. A metadata key that would shadow one of the four is prefixed with `metadata.`.
    static func json(
        date: Date,
        level: Logger.Level,
        label: String,
        message: String,
        _ metadata: Logger.Metadata
    ) -> String {
        var out = "{\"time\":\(quote(timestamp(date))),\"level\":\(quote(level.rawValue)),"
        out += "\"logger\":\(quote(label)),\"message\":\(quote(message))"
        for key in metadata.keys.sorted() {
            let name = ["time", "level", "logger", "message"].contains(key) ? "metadata." + key : key
            out += ",\(quote(name)):\(jsonValue(metadata[key]!))"
        }
        return out + "}"
    }

    /// `time level logger: message key=value key="value with spaces"`.
    static func text(
        date: Date,
        level: Logger.Level,
        label: String,
        message: String,
        _ metadata: Logger.Metadata
    ) -> String {
        var out = "\(timestamp(date)) \(level.rawValue) \(label): \(message)"
        for key in metadata.keys.sorted() {
            let value = flat(metadata[key]!)
            let bare = !value.isEmpty && value.unicodeScalars.allSatisfy { $0.value > 0x20 && $0 != "\"" && $0 != "=" }
            out += " \(key)=\(bare ? value : quote(value))"
        }
        return out
    }

    private static func jsonValue(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let text): return quote(text)
        case .stringConvertible(let value): return quote(value.description)
        case .array(let values): return "[" + values.map(jsonValue).joined(separator: ",") + "]"
        case .dictionary(let values):
            return "{" + values.keys.sorted().map { "\(quote($0)):\(jsonValue(values[$0]!))" }.joined(separator: ",")
                + "}"
        }
    }

    private static func flat(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let text): text
        case .stringConvertible(let value): value.description
        case .array(let values): "[" + values.map(flat).joined(separator: ",") + "]"
        case .dictionary(let values):
            "{" + values.keys.sorted().map { "\($0)=\(flat(values[$0]!))" }.joined(separator: ",")
                + "}"
        }
    }

    /// A JSON string literal: quotes, backslashes and every control character escaped.
    static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _
            where scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value)
                || scalar.value == 0x2028 || scalar.value == 0x2029:
                out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// RFC 3339 in UTC with milliseconds, as every time the product prints.
    static func timestamp(_ date: Date) -> String { Timestamp.milliseconds(date) }
}
