import ArgumentParser
import EscrowCore
import Foundation
import ProfileEscrow

/// `profile-escrow deliveries pause|resume|status`: the delivery switch every node shares through the store. A pause
/// or resume reaches every running worker at its next poll; no restart.
struct Deliveries: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pause or resume deliveries on every node sharing the store, or show whether they are paused.",
        subcommands: [Pause.self, Resume.self, Status.self]
    )

    struct Pause: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Pause deliveries: every worker claims nothing from its next poll on (captures and retention go on)."
        )
        @OptionGroup var change: Change

        func run() async throws { try await change.run(paused: true) }
    }

    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Resume deliveries: every worker claims again at its next poll."
        )
        @OptionGroup var change: Change

        func run() async throws { try await change.run(paused: false) }
    }

    /// What a pause and a resume take: the store, and the reason kept in the audit trail.
    struct Change: ParsableArguments {
        @OptionGroup var options: GlobalOptions
        @Option(help: "Why (a ticket or a cause, never personal data): kept in the audit trail with the change.")
        var reason: String

        func validate() throws {
            if OperatorReason(reason) == nil { throw ValidationError("--reason: \(OperatorReason.rule)") }
        }

        func run(paused: Bool) async throws {
            let actions = try await Deliveries.actions(options, readOnly: false)
            let reason = try OperatorActions.reason(reason)
            let change =
                paused
                ? try await actions.pauseDeliveries(reason: reason, actor: .cli)
                : try await actions.resumeDeliveries(reason: reason, actor: .cli)
            let state = paused ? "paused" : "running"
            print(change.changed ? "deliveries \(state)" : "deliveries were already \(state); nothing changed")
            Deliveries.describe(change.deliveries)
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Whether deliveries are paused, since when, by whom and why, and what expires within a day."
        )
        @OptionGroup var options: GlobalOptions

        func run() async throws {
            Deliveries.describe(try await Deliveries.actions(options, readOnly: true).deliveries())
        }
    }

    /// The actions over the store; opens no escrow (a keyring in custody stays wrapped, and its engine may be down).
    static func actions(_ options: GlobalOptions, readOnly: Bool) async throws -> OperatorActions {
        OperatorActions(
            escrow: try await options.openEscrow(
                readOnly: readOnly,
                owner: "profile-escrow deliveries",
                opensEscrows: false
            )
        )
    }

    static func describe(_ view: OperatorActions.DeliveriesView) {
        let control = view.control
        print("deliveries: \(control.paused ? "paused" : "running")")
        if let at = control.changedAt { print("\(control.paused ? "paused" : "resumed") at: \(Timestamp.seconds(at))") }
        if let by = control.changedBy { print("by: \(by)") }
        if let reason = control.reason { print("reason: \(reason)") }
        print("rate: \(view.ratePerSecond.map { "\(DefaultText.number($0)) a second for the cluster" } ?? "no limit")")
        let hours = Int(OperatorActions.expiringWindow / 3600)
        print("expiring within \(hours) hours (retention is not held): \(view.expiringWhilePaused)")
    }
}
