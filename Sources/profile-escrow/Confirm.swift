import ArgumentParser
import EscrowCore
import ProfileEscrow

struct Confirm: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The backend registered the user: purge the escrow as confirmed."
    )
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The Apple user identifier (sub).") var userIdentifier: String

    func validate() throws { try validateUserIdentifier(userIdentifier) }

    func run() async throws {
        // Opens no escrow: a keyring in custody stays wrapped, and its engine may be down.
        let escrow = try await options.openEscrow(owner: "profile-escrow confirm", opensEscrows: false)
        let purged = try await escrow.confirm(userIdentifier: userIdentifier, actor: .cli)
        guard purged else { throw NothingHeld("nothing is held for this user") }
        print("purged (confirmed)")
    }
}
