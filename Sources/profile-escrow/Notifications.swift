import ArgumentParser
import EscrowCore
import Foundation
import ProfileEscrow

/// `profile-escrow notifications`: Apple's server-to-server notifications every node received, by type and outcome
/// over the last 24 hours, and the last ones (type, time, outcome): what the console's notifications page shows,
/// never a user identifier.
struct Notifications: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apple's notifications received over the last 24 hours by type and outcome, and the last ones."
    )
    @OptionGroup var options: GlobalOptions
    @Option(help: "How many of the last notifications to list (0 to \(OperatorActions.notificationListLimit)).")
    var last = 20
    @Option(help: "text or json.") var format: OutputFormat = .text

    func validate() throws {
        guard (0...OperatorActions.notificationListLimit).contains(last) else {
            throw ValidationError("--last: from 0 to \(OperatorActions.notificationListLimit)")
        }
    }

    /// The JSON shape: `last24h` as the admin overview's `last24h.appleNotifications`, then the events.
    struct View: Encodable {
        struct Event: Encodable {
            var type: String
            var outcome: String
            var at: String
        }
        var last24h: [String: [String: Int]]
        var events: [Event]
    }

    func run() async throws {
        let escrow = try await options.openEscrow(
            readOnly: true,
            owner: "profile-escrow notifications",
            opensEscrows: false
        )
        let actions = OperatorActions(escrow: escrow)
        var counts: [String: [String: Int]] = [:]
        for count in try await actions.notificationCounts() {
            counts[count.type, default: [:]][count.outcome, default: 0] += count.count
        }
        let events = try await actions.notificationEvents(limit: last).map {
            View.Event(type: $0.type, outcome: $0.outcome, at: Timestamp.seconds($0.at))
        }
        switch format {
        case .json:
            print(try OutputFormat.json(View(last24h: counts, events: events)))
        case .text:
            print("last 24 hours:\(counts.isEmpty ? " none" : "")")
            for type in counts.keys.sorted() {
                let outcomes = counts[type, default: [:]].sorted { $0.key < $1.key }
                print("  \(type): " + outcomes.map { "\($0.value) \($0.key)" }.joined(separator: ", "))
            }
            if last > 0 {
                print("last \(events.count):")
                for event in events { print("  \(event.at)  \(event.type)  \(event.outcome)") }
            }
        }
    }
}
