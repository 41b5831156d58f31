import ArgumentParser
import EscrowCore
import ProfileEscrow

struct Sweep: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Purge every escrow past its retention as expired.")
    @OptionGroup var options: GlobalOptions

    func run() async throws {
        // Opens no escrow: a keyring in custody stays wrapped, and its engine may be down.
        let escrow = try await options.openEscrow(owner: "profile-escrow sweep", opensEscrows: false)
        let progress = Progress(label: "expired")
        let count = try await escrow.sweep(actor: .cli, progress: { progress.update($0) })
        progress.finish()
        print("swept: \(count) expired escrows purged")
    }
}
