import ArgumentParser
import EscrowCrypto
import EscrowCustody
import Foundation
import ProfileEscrow

/// `apple …`: the team's Sign in with Apple key, which signs the client secrets of Apple's token and revoke calls.
struct AppleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apple",
        abstract: "Apple's side: the team's Sign in with Apple key (.p8) in custody; token revocations.",
        subcommands: [AppleKeyCommand.self, AppleRevokeCommand.self]
    )
}

/// `apple revoke`: queues a token's revocation at Apple, as `POST /v1/apple/revocations` does; a `serve` with
/// `--apple-team-id` sends it. The token is read from standard input (never an argument: those show in `ps`).
struct AppleRevokeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke",
        abstract: "Queue the revocation of a user's Apple token (read from standard input); prints its id.",
        discussion: """
            The token is stored sealed and sent to Apple by a serve running with --apple-team-id, retried until \
            Apple takes it; its outcome is audited (apple-token-revoked, apple-revocation-failed).
            """
    )
    @OptionGroup var options: GlobalOptions
    @Option(help: "The client id the token was issued to (the Services ID or the app's bundle id).")
    var clientID: String
    @Option(help: "refresh_token (default) or access_token.")
    var tokenTypeHint = "refresh_token"

    func validate() throws {
        guard ["refresh_token", "access_token"].contains(tokenTypeHint) else {
            throw ValidationError("--token-type-hint is refresh_token or access_token")
        }
    }

    func run() async throws {
        let token = (readLine(strippingNewline: true) ?? "").trimmingCharacters(in: .whitespaces)
        guard !token.isEmpty, token.utf8.count <= 4096 else {
            throw ValidationError("give the token on standard input (one line)")
        }
        let escrow = try await options.openEscrow(owner: "profile-escrow apple revoke", opensEscrows: false)
        let id = try await escrow.queueAppleRevocation(token: token, tokenTypeHint: tokenTypeHint, clientID: clientID)
        print(id)
    }
}

/// `apple key import | show`.
struct AppleKeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Put the team's .p8 key into custody (import), or say where it is (show).",
        subcommands: [Import.self, Show.self]
    )

    /// Where the key goes.
    enum CustodyKind: String, ExpressibleByArgument, CaseIterable {
        case pkcs11
        case transit
        case file
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Import the .p8 into a PKCS#11 token or OpenBao/Vault Transit, or keep it as a 0600 file.",
            discussion: """
                The key's location, key id, team id and public key are recorded beside the keyring \
                (<keyring>.apple-key, mode 0600); no secret is recorded. The PIN comes from PROFILE_ESCROW_PKCS11_PIN \
                or PROFILE_ESCROW_PKCS11_PIN_FILE, the Transit token from PROFILE_ESCROW_TRANSIT_TOKEN or \
                PROFILE_ESCROW_TRANSIT_TOKEN_FILE. After an import, the .p8 file still holds the key: keep it offline \
                or delete it.
                """
        )
        @OptionGroup var options: GlobalOptions

        @Option(help: ArgumentHelp("Apple's .p8 key file (PKCS#8 PEM).", valueName: "file"))
        var p8: String
        @Option(help: "The key's id (10 characters, as Apple shows it).")
        var keyId: String
        @Option(help: "The team id (10 characters).")
        var teamId: String
        @Option(help: "Where the key goes: pkcs11, transit, or file (the .p8 stays where it is, 0600; weaker).")
        var custody: CustodyKind
        @Option(help: "The PKCS#11 module, e.g. /usr/lib/softhsm/libsofthsm2.so (with --custody pkcs11).")
        var pkcs11Module: String?
        @Option(help: "The token's label (with --custody pkcs11).")
        var pkcs11Token: String?
        @Option(help: "The label the EC private key gets in the token (with --custody pkcs11; never replaced).")
        var pkcs11Key: String?
        @Option(help: "OpenBao/Vault address, e.g. https://bao.internal:8200 (with --custody transit).")
        var transitAddress: String?
        @Option(help: "The name the ecdsa-p256 key gets in Transit (with --custody transit; never replaced).")
        var transitKey: String?
        @Option(help: "The Transit secrets engine's mount path (default transit).")
        var transitMount: String?
        @Option(help: "A PEM file of the CAs to trust for an https address (default: the system's).")
        var transitCa: String?

        func validate() throws {
            for (name, value) in [("--key-id", keyId), ("--team-id", teamId)] {
                guard value.utf8.count == 10,
                    value.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) })
                else { throw ValidationError("\(name) is 10 capital letters or digits, as Apple shows it") }
            }
            let pkcs11Options = [pkcs11Module, pkcs11Token, pkcs11Key].contains { $0 != nil }
            let transitOptions = [transitAddress, transitKey, transitMount, transitCa].contains { $0 != nil }
            guard custody == .pkcs11 || !pkcs11Options else {
                throw ValidationError("--pkcs11-* options go with --custody pkcs11")
            }
            guard custody == .transit || !transitOptions else {
                throw ValidationError("--transit-* options go with --custody transit")
            }
            guard custody == .file || keyCustody != nil else {
                throw ValidationError(
                    "--custody pkcs11 needs --pkcs11-module, --pkcs11-token and --pkcs11-key; --custody transit needs "
                        + "--transit-address and --transit-key"
                )
            }
            if case .transit(let transit) = keyCustody, let refusal = transit.cleartextRefusal {
                throw ValidationError("--transit-address: \(refusal)")
            }
            do {
                try keyCustody?.validate()
            } catch {
                throw ValidationError(error.message)
            }
        }

        /// The engine the options name; nil for a file, or when its options are missing.
        private var keyCustody: KeyCustody? {
            switch custody {
            case .file: nil
            case .pkcs11:
                pkcs11Module.flatMap { module in
                    pkcs11Token.flatMap { token in
                        pkcs11Key.map { .pkcs11(KeyCustody.PKCS11(module: module, token: token, key: $0)) }
                    }
                }
            case .transit:
                transitAddress.flatMap { address in
                    transitKey.map {
                        .transit(
                            KeyCustody.Transit(
                                address: address,
                                mount: transitMount ?? "transit",
                                key: $0,
                                caFile: transitCa
                            )
                        )
                    }
                }
            }
        }

        func run() async throws {
            let custody: AppleKeyRecord.Custody =
                switch keyCustody {
                case .pkcs11(let pkcs11)?: .pkcs11(pkcs11)
                case .transit(let transit)?: .transit(transit)
                case nil: .file(path: URL(fileURLWithPath: p8).standardizedFileURL.path)
                }
            let recordPath = AppleKeyRecord.path(besideKeyring: options.keyringPath)
            let record = try await AppleKeyRecord.importKey(
                p8Path: p8,
                keyID: keyId,
                teamID: teamId,
                into: custody,
                recordPath: recordPath,
                environment: options.environment
            )
            print(
                "Apple key \(record.keyID) of team \(record.teamID) in \(record.custody.location); "
                    + "recorded in \(recordPath)"
            )
            if self.custody != .file {
                print("the .p8 file \(p8) still holds the key: keep it offline or delete it")
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the key id, team id, custody and public key (never the private key)."
        )
        @OptionGroup var options: GlobalOptions

        func run() async throws {
            let record = try AppleKeyRecord.read(path: AppleKeyRecord.path(besideKeyring: options.keyringPath))
            print("key id: \(record.keyID)")
            print("team id: \(record.teamID)")
            print("custody: \(record.custody.kind): \(record.custody.location)")
            print("public key fingerprint: \(record.fingerprint)")
            print(record.publicKeyPEM)
        }
    }
}
