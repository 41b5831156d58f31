import ArgumentParser
import EscrowCore
import EscrowCrypto
import Foundation
import ProfileEscrow

struct Capture: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Capture a profile (its JSON on standard input); prints the escrow id."
    )
    @OptionGroup var options: GlobalOptions

    func run() async throws {
        // Read one byte more than allowed so an oversized body is refused, not truncated.
        var body = [UInt8]()
        while body.count <= ProfileParser.maximumBodySize,
            let chunk = try FileHandle.standardInput.read(upToCount: ProfileParser.maximumBodySize + 1 - body.count),
            !chunk.isEmpty
        {
            body += chunk
        }
        let input = try ProfileParser.parse(body)  // before opening anything: bad input touches nothing
        let escrow = try options.openEscrow(owner: "profile-escrow capture")
        let receipt = try await escrow.capture(input.profile, verified: false, actor: .cli)
        print(receipt.escrowID.hex)
        FileHandle.standardError.write(
            Data("\(receipt.outcome.rawValue), \(receipt.state.rawValue), expires \(receipt.expiresAt)\n".utf8)
        )
    }
}

struct Confirm: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The backend registered the user: purge the escrow as confirmed."
    )
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The Apple user identifier (sub).") var userIdentifier: String

    func validate() throws { try validateUserIdentifier(userIdentifier) }

    func run() async throws {
        let escrow = try options.openEscrow(owner: "profile-escrow confirm")
        let purged = try await escrow.confirm(userIdentifier: userIdentifier, actor: .cli)
        guard purged else { throw NothingHeld("nothing is held for this user") }
        print("purged (confirmed)")
    }
}

struct Erase: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Purge the user's escrow as erased.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The Apple user identifier (sub).") var userIdentifier: String

    func validate() throws { try validateUserIdentifier(userIdentifier) }

    func run() async throws {
        let escrow = try options.openEscrow(owner: "profile-escrow erase")
        let purged = try await escrow.erase(userIdentifier: userIdentifier, reason: .erased, actor: .cli)
        guard purged else { throw NothingHeld("nothing is held for this user") }
        print("purged (erased)")
    }
}

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

struct Sweep: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Purge every escrow past its retention as expired.")
    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let escrow = try options.openEscrow(owner: "profile-escrow sweep")
        let progress = Progress(label: "expired")
        let count = try await escrow.sweep(actor: .cli, progress: { progress.update($0) })
        progress.finish()
        print("swept: \(count) expired escrows purged")
    }
}

struct Requeue: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Bring dead escrows back to pending.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The escrow id (32 hex characters).") var escrowID: String?
    @Flag(name: .customLong("all-dead"), help: "Requeue every dead escrow.") var allDead = false

    func validate() throws {
        switch (escrowID, allDead) {
        case (nil, false): throw ValidationError("give an escrow id or --all-dead")
        case (.some, true): throw ValidationError("give an escrow id or --all-dead, not both")
        case (let id?, false):
            guard EscrowID(hex: id) != nil else { throw ValidationError("escrowId: must be 32 hex characters") }
        default: break
        }
    }

    func run() async throws {
        let escrow = try options.openEscrow(owner: "profile-escrow requeue")
        if allDead {
            print("requeued \(try await escrow.requeueAllDead(actor: .cli)) dead escrows")
        } else if let id = escrowID.flatMap(EscrowID.init(hex:)) {
            guard try await escrow.requeue(id: id, actor: .cli) else {
                throw ValidationError("escrow \(id.hex) is not dead; nothing to requeue")
            }
            print("requeued \(id.hex)")
        }
    }
}
