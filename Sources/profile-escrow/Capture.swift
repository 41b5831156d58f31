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
        try input.requireNoAuthorizationCode()  // nothing verifies here: a code would go unredeemed
        // Sealing needs only the public keys: a keyring in custody stays wrapped, and its engine may be down.
        let escrow = try await options.openEscrow(owner: "profile-escrow capture", opensEscrows: false)
        let receipt = try await escrow.capture(input.profile, verified: false, actor: .cli)
        print(receipt.escrowID.hex)
        FileHandle.standardError.write(
            Data(
                "\(receipt.outcome.rawValue), \(receipt.state.rawValue), expires \(Timestamp.milliseconds(receipt.expiresAt))\n"
                    .utf8
            )
        )
    }
}
