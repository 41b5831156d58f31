import ArgumentParser
import EscrowCore
import EscrowCrypto
import ProfileEscrow

struct Requeue: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Bring dead escrows back to pending.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The escrow id (32 hex characters).") var escrowID: String?
    @Flag(name: .customLong("all-dead"), help: "Requeue every dead escrow.") var allDead = false
    @Option(help: "Why (a ticket or a cause, never personal data): kept in the audit trail with the requeue.")
    var reason: String?

    func validate() throws {
        if let reason, OperatorReason(reason) == nil { throw ValidationError("--reason: \(OperatorReason.rule)") }
        switch (escrowID, allDead) {
        case (nil, false): throw ValidationError("give an escrow id or --all-dead")
        case (.some, true): throw ValidationError("give an escrow id or --all-dead, not both")
        case (let id?, false):
            guard EscrowID(hex: id) != nil else { throw ValidationError("escrowId: must be 32 hex characters") }
        default: break
        }
    }

    func run() async throws {
        // Opens no escrow: a keyring in custody stays wrapped, and its engine may be down.
        let actions = OperatorActions(
            escrow: try await options.openEscrow(owner: "profile-escrow requeue", opensEscrows: false)
        )
        let reason = reason.flatMap(OperatorReason.init)
        if allDead {
            // Every dead escrow, in one walk: the CLI has no request to bound.
            let result = try await actions.requeue(matching: EscrowFilter(), reason: reason, actor: .cli, limit: .max)
            print("requeued \(result.requeued) dead escrows")
        } else if let id = escrowID.flatMap(EscrowID.init(hex:)) {
            guard try await actions.requeue(id, reason: reason, actor: .cli) else {
                throw ValidationError("escrow \(id.hex) is not dead; nothing to requeue")
            }
            print("requeued \(id.hex)")
        }
    }
}
