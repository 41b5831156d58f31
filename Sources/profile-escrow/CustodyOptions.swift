import ArgumentParser
import EscrowCrypto

/// The custody kinds of `--custody`.
enum CustodyKind: String, ExpressibleByArgument, CaseIterable {
    case transit
    case pkcs11
}

/// `--custody transit|pkcs11` and the engine's location (`keys init`, `keys custody wrap`). Recorded in the keyring
/// file, so later commands need none of them. Credentials are never options: `PROFILE_ESCROW_TRANSIT_TOKEN` or
/// `PROFILE_ESCROW_TRANSIT_TOKEN_FILE`, `PROFILE_ESCROW_PKCS11_PIN` or `PROFILE_ESCROW_PKCS11_PIN_FILE`.
struct CustodyOptions: ParsableArguments {
    @Option(help: "Keep the master secret keys wrapped by an external engine: transit or pkcs11.")
    var custody: CustodyKind?

    @Option(help: "OpenBao/Vault address, e.g. https://bao.internal:8200 (with --custody transit).")
    var transitAddress: String?
    @Option(help: "The Transit key's name (type aes256-gcm96; with --custody transit).")
    var transitKey: String?
    @Option(help: "The Transit secrets engine's mount path (default transit).")
    var transitMount: String?
    @Option(help: "A PEM file of the CAs to trust for an https address (default: the system's).")
    var transitCa: String?

    @Option(help: "The PKCS#11 module, e.g. /usr/lib/softhsm/libsofthsm2.so (with --custody pkcs11).")
    var pkcs11Module: String?
    @Option(help: "The token's label (with --custody pkcs11).")
    var pkcs11Token: String?
    @Option(help: "The AES key's label; created in the token (sensitive, not extractable) when missing.")
    var pkcs11Key: String?

    func validate() throws {
        let transitOptions = [transitAddress, transitKey, transitMount, transitCa].contains { $0 != nil }
        let pkcs11Options = [pkcs11Module, pkcs11Token, pkcs11Key].contains { $0 != nil }
        switch custody {
        case nil:
            guard !transitOptions, !pkcs11Options else {
                throw ValidationError("--transit-* and --pkcs11-* options need --custody")
            }
        case .transit:
            guard transitAddress != nil, transitKey != nil else {
                throw ValidationError("--custody transit needs --transit-address and --transit-key")
            }
            guard !pkcs11Options else { throw ValidationError("--pkcs11-* options go with --custody pkcs11") }
        case .pkcs11:
            guard pkcs11Module != nil, pkcs11Token != nil, pkcs11Key != nil else {
                throw ValidationError("--custody pkcs11 needs --pkcs11-module, --pkcs11-token and --pkcs11-key")
            }
            guard !transitOptions else { throw ValidationError("--transit-* options go with --custody transit") }
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

    /// The custody the options name; nil without `--custody`.
    var keyCustody: KeyCustody? {
        switch custody {
        case nil: nil
        case .transit:
            .transit(
                KeyCustody.Transit(
                    address: transitAddress ?? "",
                    mount: transitMount ?? "transit",
                    key: transitKey ?? "",
                    caFile: transitCa
                )
            )
        case .pkcs11:
            .pkcs11(KeyCustody.PKCS11(module: pkcs11Module ?? "", token: pkcs11Token ?? "", key: pkcs11Key ?? ""))
        }
    }
}
