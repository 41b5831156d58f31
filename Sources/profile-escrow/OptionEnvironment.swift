import ArgumentParser
import Foundation

/// The one place the CLI reads its environment: every option of `serve` and `replay` (and the global ones)
/// also comes from `PROFILE_ESCROW_` + the option's name in capitals with `-` as `_`
/// (`--delivery-timeout` → `PROFILE_ESCROW_DELIVERY_TIMEOUT`).
///
/// The command line wins over the environment. A variable is parsed by the same parser as its option
/// (`ExpressibleByArgument`), strictly: a malformed value is a usage error naming the variable (exit 2),
/// never silently ignored. An empty variable counts as unset.
///
/// Not apple/swift-configuration: argument-parser has no hook for another provider, so it would be a second
/// parsing layer with its own types beside argument-parser's; this reads each option's one variable with
/// the option's own parser.
struct OptionEnvironment: Sendable {
    static let prefix = "PROFILE_ESCROW_"

    var values: [String: String]

    /// The process's environment.
    static var process: OptionEnvironment { OptionEnvironment(values: ProcessInfo.processInfo.environment) }

    /// `delivery-timeout` → `PROFILE_ESCROW_DELIVERY_TIMEOUT`.
    static func variable(_ option: String) -> String {
        prefix + option.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    /// The variable's text, nil when unset or empty.
    func text(_ option: String) -> String? {
        guard let text = values[Self.variable(option)], !text.isEmpty else { return nil }
        return text
    }

    /// A repeatable option's values: the command line's, else the variable's; either way each one may itself be a
    /// comma-separated list. Trimmed, empty entries dropped.
    func list(_ commandLine: [String], _ option: String) -> [String] {
        (commandLine.isEmpty ? [text(option) ?? ""] : commandLine)
            .flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// The command line's value, else the variable's parsed as the option would be, else nil.
    /// - Parameter secret: never echo the value in the error.
    func value<Value: ExpressibleByArgument>(
        _ commandLine: Value?,
        _ option: String,
        secret: Bool = false
    ) throws -> Value? {
        if let commandLine { return commandLine }
        guard let text = text(option) else { return nil }
        guard let value = Value(argument: text) else {
            let shown = secret ? "its value" : "'\(text)'"
            throw ValidationError("\(Self.variable(option)): \(shown) is not a valid value for --\(option)")
        }
        return value
    }

    /// A flag: set on the command line, or a variable of `1`/`true`/`yes`/`on` (true) or `0`/`false`/`no`/`off`
    /// (false); anything else is refused.
    func flag(_ commandLine: Bool, _ option: String) throws -> Bool {
        if commandLine { return true }
        guard let text = text(option) else { return false }
        switch text.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default:
            throw ValidationError(
                "\(Self.variable(option)): '\(text)' is not a boolean (use 1, true, yes, on or 0, false, no, off)"
            )
        }
    }
}
