import ArgumentParser
import EscrowCore
import EscrowCrypto
import Foundation
import ProfileEscrow

/// `profile-escrow inspect <escrowId>`: one escrow's metadata and audit history, never its content.
struct Inspect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show an escrow's metadata and audit history: attempts, statuses, leases, times (never its content)."
    )
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The escrow id (32 hex digits), as capture, status and the audit trail print it.")
    var escrowId: String
    @Option(help: "text or json.") var format: OutputFormat = .text

    func validate() throws {
        guard EscrowID(hex: escrowId) != nil else { throw ValidationError("escrowId: must be 32 hex digits") }
    }

    func run() async throws {
        let actions = OperatorActions(
            escrow: try await options.openEscrow(readOnly: true, owner: "profile-escrow inspect")
        )
        let history = try await actions.inspect(try OperatorActions.escrowID(escrowId), historyLimit: 10_000)
        switch format {
        case .json:
            print(try OutputFormat.json(history))
        case .text:
            if let status = history.status {
                print(Status.text(status))
            } else {
                print("escrowId       \(history.escrowID.hex)\nstate          purged (only the audit trail remains)")
            }
            print("\nhistory")
            for event in history.events {
                let extra = [event.detail, event.httpStatus.map { "HTTP \($0)" }].compactMap { $0 }.joined(
                    separator: " "
                )
                // An operator's reason is printed with its own label: it is text someone typed.
                let reason = event.reason.map { "  reason: \($0.debugDescription)" } ?? ""
                print(
                    "  #\(event.sequence)  \(Timestamp.milliseconds(event.at))  \(event.type.rawValue)  \(extra)  (\(event.actor.rawValue))"
                        + reason
                )
            }
        }
    }
}

/// `profile-escrow list [--state <state>]`: live escrows, oldest first, metadata only.
struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List live escrows, oldest first (metadata only).")
    @OptionGroup var options: GlobalOptions
    @Option(help: "Only escrows in this state: pending, leased, awaiting-confirmation or dead.") var state: String?
    @Option(help: "The most escrows listed.") var limit = 1_000
    @Option(help: "text or json.") var format: OutputFormat = .text

    func validate() throws {
        if let state, EscrowState(rawValue: state) == nil || state == EscrowState.purged.rawValue {
            throw ValidationError("--state: one of pending, leased, awaiting-confirmation, dead")
        }
        guard (1...1_000_000).contains(limit) else { throw ValidationError("--limit: 1 to 1000000") }
    }

    func run() async throws {
        let escrow = try await options.openEscrow(readOnly: true, owner: "profile-escrow list")
        let escrows = try await escrow.list(state: state.flatMap(EscrowState.init(rawValue:)), limit: limit)
        switch format {
        case .json:
            print(try OutputFormat.json(escrows))
        case .text:
            print("escrowId                          state                  attempts  created                   code")
            for status in escrows {
                let state = status.state.rawValue.padding(toLength: 22, withPad: " ", startingAt: 0)
                let attempts = String(status.attempts).padding(toLength: 8, withPad: " ", startingAt: 0)
                print(
                    "\(status.escrowID.hex)  \(state) \(attempts)  \(Timestamp.seconds(status.createdAt))  \(status.deadCode?.rawValue ?? "")"
                )
            }
        }
    }
}

/// `--format text|json` of the read commands.
enum OutputFormat: String, ExpressibleByArgument {
    case text, json

    /// Pretty-printed, keys sorted, as every JSON the CLI prints.
    static func json(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}
