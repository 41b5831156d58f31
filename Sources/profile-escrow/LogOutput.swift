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
        var line: [UInt8]
        switch format {
        case .json:
            line = Self.json(date: Date(), level: event.level, label: label, message: "\(event.message)", merged)
        case .text:
            line = Array(
                Self.text(date: Date(), level: event.level, label: label, message: "\(event.message)", merged).utf8
            )
        }
        line.append(0x0A)
        Self.lock.withLock {
            line.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = write(STDERR_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
                    if written <= 0 { if errno == EINTR { continue } else { return } }
                    offset += written
                }
            }
        }
    }

    /// `{"time": …, "level": …, "logger": …, "message": …, then the metadata}`: these four keys always, in this order;
    /// metadata keys as the code names them (`escrow.id`, `http.status`, `duration.ms`), nested values as
    /// JSON arrays and objects. A metadata key that would shadow one of the four is prefixed with `metadata.`.
    static func json(
        date: Date,
        level: Logger.Level,
        label: String,
        message: String,
        _ metadata: Logger.Metadata
    ) -> [UInt8] {
        // Built as UTF-8 bytes in one buffer: a worker logs every outcome, and String concatenation with a
        // character-by-character escape cost about 5% of `replay`'s CPU.
        var out: [UInt8] = []
        out.reserveCapacity(256)
        out += #"{"time":"#.utf8
        appendQuoted(timestamp(date), to: &out)
        out += #","level":"#.utf8
        appendQuoted(level.rawValue, to: &out)
        out += #","logger":"#.utf8
        appendQuoted(label, to: &out)
        out += #","message":"#.utf8
        appendQuoted(message, to: &out)
        for key in metadata.keys.sorted() {
            out.append(UInt8(ascii: ","))
            appendQuoted(["time", "level", "logger", "message"].contains(key) ? "metadata." + key : key, to: &out)
            out.append(UInt8(ascii: ":"))
            appendJSON(metadata[key]!, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
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

    private static func appendJSON(_ value: Logger.Metadata.Value, to out: inout [UInt8]) {
        switch value {
        case .string(let text): appendQuoted(text, to: &out)
        case .stringConvertible(let value): appendQuoted(value.description, to: &out)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                appendJSON(value, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .dictionary(let values):
            out.append(UInt8(ascii: "{"))
            for (index, key) in values.keys.sorted().enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                appendQuoted(key, to: &out)
                out.append(UInt8(ascii: ":"))
                appendJSON(values[key]!, to: &out)
            }
            out.append(UInt8(ascii: "}"))
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
        var out: [UInt8] = []
        appendQuoted(text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `text` as a JSON string literal: `"` and `\` escaped, `\n`, `\r`, `\t`, and `\u00XX` for the other
    /// C0 controls, DEL and the C1 controls (U+0080–U+009F), `\u2028` and `\u2029` (line and paragraph separators,
    /// which break JavaScript and some log viewers). Everything else is copied as its UTF-8 bytes.
    static func appendQuoted(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            var index = 0
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
                case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
                case 0x0A: out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
                case 0x0D: out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
                case 0x09: out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
                case 0x00..<0x20, 0x7F: appendEscape(UInt16(byte), to: &out)
                case 0xC2 where index + 1 < bytes.count && (0x80...0x9F).contains(bytes[index + 1]):
                    appendEscape(UInt16(bytes[index + 1]), to: &out)
                    index += 1
                case 0xE2
                where index + 2 < bytes.count && bytes[index + 1] == 0x80
                    && (bytes[index + 2] == 0xA8 || bytes[index + 2] == 0xA9):
                    appendEscape(bytes[index + 2] == 0xA8 ? 0x2028 : 0x2029, to: &out)
                    index += 2
                default: out.append(byte)
                }
                index += 1
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// `\uXXXX`, lowercase hexadecimal.
    private static func appendEscape(_ value: UInt16, to out: inout [UInt8]) {
        let digits = Array("0123456789abcdef".utf8)
        out += [UInt8(ascii: "\\"), UInt8(ascii: "u")]
        for shift in stride(from: 12, through: 0, by: -4) { out.append(digits[Int((value >> UInt16(shift)) & 0xF)]) }
    }

    /// RFC 3339 in UTC with milliseconds, as every time the product prints.
    static func timestamp(_ date: Date) -> String { Timestamp.milliseconds(date) }
}
