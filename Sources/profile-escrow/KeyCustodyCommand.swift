import ArgumentParser
import EscrowCrypto
import EscrowCustody
import ProfileEscrow

/// `keys custody wrap | unwrap | rewrap`: move a keyring's master secret keys into, out of or within custody.
struct KeyCustodyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "custody",
        abstract:
            "Move the master secret keys into custody (wrap), out of it (unwrap), or under the engine's newest key.",
        subcommands: [Wrap.self, Unwrap.self, Rewrap.self]
    )

    struct Wrap: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Put a plain keyring into custody: its secret keys wrapped, the plain secret bytes overwritten."
        )
        @OptionGroup var options: GlobalOptions
        @OptionGroup var custody: CustodyOptions

        func validate() throws {
            guard custody.custody != nil else { throw ValidationError("--custody transit|pkcs11 is required") }
        }

        func run() async throws {
            guard let keyCustody = custody.keyCustody else { return }
            let escrow = try await options.openEscrow(owner: "profile-escrow keys custody wrap", createKeyring: false)
            let custodian = KeyringCustody.custodian(for: keyCustody, mayCreateKey: true)
            let wrapped = try await escrow.keyring.wrapped(into: keyCustody, by: custodian)
            try await escrow.changeCustody(
                to: wrapped,
                keyringPath: options.keyringPath,
                detail: "wrapped by \(keyCustody.kind): \(keyCustody.engine)"
            )
            print(
                "keyring \(options.keyringPath) in custody: its master secret keys are wrapped by \(keyCustody.engine); "
                    + "the plain secret bytes were overwritten (copies in backups were not)"
            )
        }
    }

    struct Unwrap: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Take a keyring out of custody: its secret keys written in plain to the file (migration only)."
        )
        @OptionGroup var options: GlobalOptions

        func run() async throws {
            let escrow = try await options.openEscrow(owner: "profile-escrow keys custody unwrap", createKeyring: false)
            guard let custody = escrow.keyring.custody else {
                throw ValidationError("the keyring \(options.keyringPath) is not in custody")
            }
            try await escrow.changeCustody(
                to: try escrow.keyring.outOfCustody(),
                keyringPath: options.keyringPath,
                detail: "unwrapped from \(custody.kind): \(custody.engine)"
            )
            print("keyring \(options.keyringPath) out of custody: its master secret keys are in the file, in plain")
        }
    }

    struct Rewrap: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Wrap every secret key again under the engine's newest key version (after a Transit rotate)."
        )
        @OptionGroup var options: GlobalOptions

        func run() async throws {
            let escrow = try await options.openEscrow(owner: "profile-escrow keys custody rewrap", createKeyring: false)
            guard let custody = escrow.keyring.custody else {
                throw ValidationError("the keyring \(options.keyringPath) is not in custody")
            }
            let rewrapped = try await escrow.keyring.rewrappedInCustody(
                by: KeyringCustody.custodian(for: custody)
            )
            try await escrow.changeCustody(
                to: rewrapped,
                keyringPath: options.keyringPath,
                detail: "rewrapped by \(custody.kind): \(custody.engine)"
            )
            print("keyring \(options.keyringPath): every secret key wrapped again by \(custody.engine)")
        }
    }
}
