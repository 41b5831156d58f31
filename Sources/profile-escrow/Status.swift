import ArgumentParser
import EscrowCore
import EscrowCrypto
import Foundation
import ProfileEscrow

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show an escrow's metadata (never its content).")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The Apple user identifier (sub).") var userIdentifier: String
    @Option(help: "text or json.") var format: OutputFormat = .text

    func validate() throws { try validateUserIdentifier(userIdentifier) }

    func run() async throws {
        // Read-only: works beside a running writer. Needs the keyring only for the blind index.
        let escrow = try await options.openEscrow(readOnly: true, owner: "profile-escrow status")
        let actions = OperatorActions(escrow: escrow)
        guard let status = try await actions.status(userIdentifier: userIdentifier, actor: .cli) else {
            if try await actions.isHeldEscrowID(userIdentifier) {
                throw NothingHeld(
                    "nothing is held for this user; this is an escrow id: `profile-escrow inspect \(userIdentifier)`"
                )
            }
            throw NothingHeld("nothing is held for this user")
        }
        switch format {
        case .text:
            print(Self.text(status))
        case .json:
            // The shape of `GET /v1/escrows/{userIdentifier}` (``EscrowStatus``), pretty-printed.
            print(try OutputFormat.json(status))
        }
    }

    /// The metadata as aligned `key value` lines.
    static func text(_ status: EscrowStatus) -> String {
        let fields: [(String, String)] = [
            ("escrowId", status.escrowID.hex), ("state", status.state.rawValue),
            ("attempts", "\(status.attempts)"),
            ("nextAttemptAt", status.nextAttemptAt.map(Timestamp.seconds) ?? "-"),
            ("createdAt", Timestamp.seconds(status.createdAt)), ("expiresAt", Timestamp.seconds(status.expiresAt)),
            ("keyVersion", "\(status.keyVersion)"), ("deadCode", status.deadCode?.rawValue ?? "-"),
            ("lastStatus", status.lastStatus.map(String.init) ?? "-"),
        ]
        return fields.map { "\($0.padding(toLength: 14, withPad: " ", startingAt: 0)) \($1)" }.joined(separator: "\n")
    }
}
