import EscrowCrypto
import Foundation

/// A real custody engine the tests run against, from the variables `scripts/test.sh` exports after starting it
/// (`scripts/openbao.sh`, `scripts/softhsm.sh`). Without them every engine test fails: they are never skipped.
struct CustodyEngine: Sendable, CustomStringConvertible {
    enum Kind: String, Sendable, CaseIterable {
        case transit
        case pkcs11
    }

    let kind: Kind
    /// `--custody …` and the engine's options, as an operator would type them.
    let arguments: [String]
    /// The variables a process needs to use the engine: the credential (and SoftHSM2's configuration).
    let environment: [String: String]
    /// The same with a wrong credential.
    let wrongCredential: [String: String]
    let custody: KeyCustody
    /// The credential itself, which must never show in any output.
    let credential: String

    var description: String { kind.rawValue }

    struct MissingEngine: Error, CustomStringConvertible {
        var description: String
    }

    static func variable(_ name: String) throws -> String {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else {
            throw MissingEngine(
                description: "\(name) is not set: run the tests with scripts/test.sh, which starts OpenBao and "
                    + "SoftHSM2 for them (or `eval \"$(scripts/openbao.sh start)\"; eval \"$(scripts/softhsm.sh start)\"`)"
            )
        }
        return value
    }

    /// The engine; each call with a new key label (PKCS#11) or the scripts' Transit key.
    static func make(
        _ kind: Kind,
        key: String = "escrow-" + Hex.encode(Hashing.randomBytes(count: 4)),
        transitKey: String? = nil
    ) throws -> Self {
        switch kind {
        case .transit:
            let address = try variable("PROFILE_ESCROW_TEST_BAO_ADDR")
            let token = try variable("PROFILE_ESCROW_TEST_BAO_TOKEN")
            let name = try transitKey ?? variable("PROFILE_ESCROW_TEST_BAO_KEY")
            return CustodyEngine(
                kind: kind,
                arguments: ["--custody", "transit", "--transit-address", address, "--transit-key", name],
                environment: ["PROFILE_ESCROW_TRANSIT_TOKEN": token],
                wrongCredential: ["PROFILE_ESCROW_TRANSIT_TOKEN": "s.notAValidToken0000000000"],
                custody: .transit(KeyCustody.Transit(address: address, key: name)),
                credential: token
            )
        case .pkcs11:
            let module = try variable("PROFILE_ESCROW_TEST_PKCS11_MODULE")
            let token = try variable("PROFILE_ESCROW_TEST_PKCS11_TOKEN")
            let pin = try variable("PROFILE_ESCROW_TEST_PKCS11_PIN")
            let configuration = try variable("SOFTHSM2_CONF")
            return CustodyEngine(
                kind: kind,
                arguments: [
                    "--custody", "pkcs11", "--pkcs11-module", module, "--pkcs11-token", token, "--pkcs11-key", key,
                ],
                environment: ["PROFILE_ESCROW_PKCS11_PIN": pin, "SOFTHSM2_CONF": configuration],
                wrongCredential: ["PROFILE_ESCROW_PKCS11_PIN": "000000", "SOFTHSM2_CONF": configuration],
                custody: .pkcs11(KeyCustody.PKCS11(module: module, token: token, key: key)),
                credential: pin
            )
        }
    }

    /// Runs the scripts' OpenBao control (`halt`, `resume`).
    static func openBao(_ command: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [try variable("PROFILE_ESCROW_TEST_BAO_SCRIPT"), command]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw MissingEngine(description: "scripts/openbao.sh \(command) failed")
        }
    }

    /// A request to OpenBao with the root token (what an operator does: rotate the Transit key).
    static func openBaoRoot(_ method: String, _ path: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "curl", "-sf", "-X", method, "-H", "X-Vault-Token: \(try variable("PROFILE_ESCROW_TEST_BAO_ROOT_TOKEN"))",
            try variable("PROFILE_ESCROW_TEST_BAO_ADDR") + "/v1/" + path,
        ]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw MissingEngine(description: "OpenBao \(method) \(path) failed")
        }
    }
}
