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

    enum OutputFormat: String, ExpressibleByArgument { case text, json }

    func validate() throws { try validateUserIdentifier(userIdentifier) }

    func run() async throws {
        // Read-only: works beside a running writer. Needs the keyring only for the blind index.
        let escrow = try options.openEscrow(readOnly: true, owner: "profile-escrow status")
        guard let status = try await escrow.status(userIdentifier: userIdentifier) else {
            throw NothingHeld("nothing is held for this user")
        }
        switch format {
        case .text:
            let fields: [(String, String)] = [
                ("escrowId", status.escrowID.hex), ("state", status.state.rawValue),
                ("attempts", "\(status.attempts)"),
                ("nextAttemptAt", status.nextAttemptAt.map(Timestamp.seconds) ?? "-"),
                ("createdAt", Timestamp.seconds(status.createdAt)), ("expiresAt", Timestamp.seconds(status.expiresAt)),
                ("keyVersion", "\(status.keyVersion)"), ("deadCode", status.deadCode?.rawValue ?? "-"),
                ("lastStatus", status.lastStatus.map(String.init) ?? "-"),
            ]
            for (key, value) in fields { print("\(key.padding(toLength: 14, withPad: " ", startingAt: 0)) \(value)") }
        case .json:
            // The shape of `GET /v1/escrows/{userIdentifier}` (``EscrowStatus``), pretty-printed.
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(status), as: UTF8.self))
        }
    }
}
