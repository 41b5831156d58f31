import ArgumentParser
import EscrowCore
import ProfileEscrow

struct Erase: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Purge the user's escrow as erased.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The Apple user identifier (sub).") var userIdentifier: String
    @Option(help: "Why (a ticket or a cause, never personal data): kept in the audit trail with the erasure.")
    var reason: String?

    func validate() throws {
        try validateUserIdentifier(userIdentifier)
        if let reason, OperatorReason(reason) == nil { throw ValidationError("--reason: \(OperatorReason.rule)") }
    }

    func run() async throws {
        // Opens no escrow: a keyring in custody stays wrapped, and its engine may be down.
        let escrow = try await options.openEscrow(owner: "profile-escrow erase", opensEscrows: false)
        let purged = try await OperatorActions(escrow: escrow).erase(
            userIdentifier: userIdentifier,
            reason: reason.flatMap(OperatorReason.init),
            actor: .cli
        )
        guard purged else { throw NothingHeld("nothing is held for this user") }
        print("purged (erased)")
    }
}
