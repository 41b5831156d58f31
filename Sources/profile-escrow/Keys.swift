import ArgumentParser
import EscrowCore
import EscrowCrypto
import EscrowCustody
import EscrowSQLite
import Foundation
import ProfileEscrow

struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the master keyring: init, show, export-public, rotate, rewrap, retire, cycle, custody.",
        subcommands: [
            Init.self, Show.self, ExportPublic.self, Rotate.self, Rewrap.self, Retire.self, Cycle.self,
            KeyCustodyCommand.self,
        ]
    )

    struct Init: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a new keyring (mode 0600); with --custody, its master secret keys only wrapped."
        )
        @OptionGroup var options: GlobalOptions
        @OptionGroup var custody: CustodyOptions

        func run() async throws {
            var keyring = Keyring.generate()
            if let keyCustody = custody.keyCustody {
                let custodian = KeyringCustody.custodian(for: keyCustody, mayCreateKey: true)
                keyring = try await keyring.wrapped(into: keyCustody, by: custodian)
            }
            try keyring.write(path: options.keyringPath, overwrite: false)
            print(
                "created keyring \(options.keyringPath), active version \(keyring.activeVersion)"
                    + (keyring.custody.map { ", master secret keys wrapped by \($0.engine)" } ?? "")
            )
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List key versions (no secrets).")
        @OptionGroup var options: GlobalOptions

        func run() async throws {
            // Not unwrapped: showing a keyring in custody needs no engine, and shows no secret.
            let keyring = try Keyring.load(path: options.keyringPath)
            let inUse = try? await options.openStore(readOnly: true, owner: "keys show").keyVersionsInUse()
            print("keyring \(options.keyringPath): \(keyring.isPublicOnly ? "public-only (capture only)" : "full")")
            print("custody: \(keyring.custody.map { "\($0.kind), \($0.engine)" } ?? "none (secret keys in the file)")")
            for key in keyring.keys {
                let publicKey = Hex.encode(key.publicKey)
                let flags = [
                    key.version == keyring.activeVersion ? "active" : nil,
                    key.hasSecretKey
                        ? (keyring.custody == nil ? "secret" : "secret wrapped")
                        : (keyring.isPublicOnly ? "public" : "retired"),
                    inUse.map { "\($0[key.version] ?? 0) escrows" },
                ].compactMap { $0 }.joined(separator: ", ")
                print("  v\(key.version)  public \(publicKey.prefix(16))…  created \(key.createdAt)  (\(flags))")
            }
        }
    }

    struct ExportPublic: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "export-public",
            abstract: "Write a public-only keyring for capture-only nodes."
        )
        @OptionGroup var options: GlobalOptions
        @Option(help: "Where to write the public-only keyring.") var out: String

        func run() async throws {
            // Not unwrapped: the public-only keyring needs no secret, so no engine.
            let keyring = try Keyring.load(path: options.keyringPath)
            try keyring.publicOnly().write(path: out, overwrite: false)
            print("wrote public-only keyring \(out): it can capture, and can never open an escrow")
        }
    }

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a new active master key version.")
        @OptionGroup var options: GlobalOptions

        func run() async throws {
            let escrow = try await options.openEscrow(owner: "profile-escrow keys rotate", createKeyring: false)
            let rotated = try await escrow.rotateKeys(keyringPath: options.keyringPath)
            print("rotated: active version \(rotated.activeVersion); run `keys rewrap` to move existing escrows")
        }
    }

    struct Rewrap: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Re-seal every escrow key to the active version (payloads untouched)."
        )
        @OptionGroup var options: GlobalOptions

        func run() async throws {
            let escrow = try await options.openEscrow(owner: "profile-escrow keys rewrap")
            let progress = Progress(label: "rewrapped")
            let result = try await escrow.rewrap(progress: { progress.update($0) })
            progress.finish()
            print(
                "rewrapped \(result.rewrapped) escrows to version \(escrow.keyring.activeVersion), \(result.failed) failed"
            )
            if result.failed > 0 { throw ExitCode(CLIFailure.problem) }
        }
    }

    struct Retire: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Destroy a version's secret key once no escrow uses it."
        )
        @OptionGroup var options: GlobalOptions
        @Argument(help: "The master key version to retire.") var version: UInt32

        func run() async throws {
            let escrow = try await options.openEscrow(owner: "profile-escrow keys retire", createKeyring: false)
            _ = try await escrow.retireKey(version: version, keyringPath: options.keyringPath)
            print(
                "retired version \(version): its secret key is gone; backups sealed only to it can no longer be opened"
            )
        }
    }

    struct Cycle: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Rotate, rewrap every escrow, then retire every older version no live escrow uses.",
            discussion: """
                Run on a schedule: once a version is retired, every copy of an escrow sealed to it (a backup, a \
                database's old pages or WAL) is unreadable, so a purged profile stays readable anywhere for at most \
                one cycle period. Safe while serve and replay run: they reload the keyring file (every 2 s, or at \
                once on SIGHUP); --grace gives them that time between the rotation and the retirement.
                """
        )
        @OptionGroup var options: GlobalOptions
        @Option(
            help:
                "Wait between rotating and retiring, so running nodes reload the keyring (e.g. 10s; 0s when none runs)."
        )
        var grace = "10s"

        func validate() throws {
            guard let seconds = DurationParser.seconds(grace), seconds <= 3600 else {
                throw ValidationError("--grace: a duration such as 0s, 10s, 1m (at most 1h)")
            }
        }

        func run() async throws {
            let escrow = try await options.openEscrow(owner: "profile-escrow keys cycle", createKeyring: false)
            let progress = Progress(label: "rewrapped")
            let seconds = DurationParser.seconds(grace) ?? 0
            let cycle = try await escrow.cycleKeys(
                keyringPath: options.keyringPath,
                grace: .milliseconds(Int64(seconds * 1000)),
                progress: { progress.update($0) }
            )
            progress.finish()
            let retired = cycle.retired.isEmpty ? "none" : cycle.retired.map { "v\($0)" }.joined(separator: ", ")
            print(
                "cycled: active version \(cycle.activeVersion); rewrapped \(cycle.rewrapped), \(cycle.failed) failed; retired \(retired)"
            )
            for (version, count) in cycle.kept.sorted(by: { $0.key < $1.key }) {
                print("kept v\(version): \(count) escrow(s) still use it (they failed to rewrap, or arrived meanwhile)")
            }
            if cycle.failed > 0 { throw ExitCode(CLIFailure.problem) }
        }
    }
}
