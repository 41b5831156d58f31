import EscrowCrypto
import EscrowTestSupport
import Foundation

#if canImport(Glibc)
import Glibc
#endif

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

    static func variable(_ name: String, in variables: [String: String]? = nil) throws -> String {
        guard let value = (variables ?? ProcessInfo.processInfo.environment)[name], !value.isEmpty else {
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
        transitKey: String? = nil,
        openBao: PrivateOpenBao? = nil
    ) throws -> Self {
        switch kind {
        case .transit:
            let variables = openBao?.variables
            let address = try variable("PROFILE_ESCROW_TEST_BAO_ADDR", in: variables)
            let token = try variable("PROFILE_ESCROW_TEST_BAO_TOKEN", in: variables)
            let name = try transitKey ?? variable("PROFILE_ESCROW_TEST_BAO_KEY", in: variables)
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

    /// Runs the scripts' OpenBao control (`start`, `halt`, `resume`, `stop`) and returns what it printed.
    ///
    /// Through `popen`, not Foundation's `Process`: after a few runs in one test process, `Process.waitUntilExit()`
    /// sometimes never returned for this script (its shell stayed a zombie nobody reaped), and the suite hung.
    /// `pclose` waits for exactly this child. The server the script starts writes to a log file in its folder, never
    /// to this pipe, so reading to the end ends when the script does.
    @discardableResult
    static func openBao(_ arguments: String...) throws -> String {
        let words = [try variable("PROFILE_ESCROW_TEST_BAO_SCRIPT")] + arguments
        let command =
            "/bin/bash "
            + words.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
            .joined(separator: " ")
        guard let pipe = popen(command, "r") else {
            throw MissingEngine(description: "scripts/openbao.sh \(arguments.joined(separator: " ")) did not start")
        }
        var printed = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, pipe)
            if count <= 0 { break }
            printed.append(contentsOf: buffer[0..<count])
        }
        let status = pclose(pipe)
        guard status == 0 else {
            throw MissingEngine(
                description: "scripts/openbao.sh \(arguments.joined(separator: " ")) failed (\(status))"
            )
        }
        return String(decoding: printed, as: UTF8.self)
    }

    /// A request to OpenBao with the root token (what an operator does: rotate the Transit key).
    static func openBaoRoot(_ method: String, _ path: String) throws {
        let process = ChildProcess()
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

/// An OpenBao server of one test's own, for the tests that stop it: halting the server the other tests share would
/// fail them while they run in parallel. Stopped (and its folder deleted) when the test ends.
final class PrivateOpenBao: Sendable {
    /// What `scripts/openbao.sh start` exported for it: address, tokens, key name, folder.
    let variables: [String: String]
    var folder: String { variables["PROFILE_ESCROW_TEST_BAO_DIR"] ?? "" }

    init() throws {
        var variables: [String: String] = [:]
        for line in try CustodyEngine.openBao("start").split(separator: "\n") where line.hasPrefix("export ") {
            let assignment = line.dropFirst("export ".count)
            guard let equals = assignment.firstIndex(of: "=") else { continue }
            variables[String(assignment[..<equals])] = String(
                assignment[assignment.index(after: equals)...].trimmingCharacters(in: CharacterSet(charactersIn: "'"))
            )
        }
        self.variables = variables
        guard !folder.isEmpty else {
            throw CustodyEngine.MissingEngine(description: "openbao.sh start printed no folder")
        }
    }

    /// Kills the server; its data stays.
    func halt() throws { try CustodyEngine.openBao("halt", folder) }
    /// Starts it again on the same port and unseals it.
    func resume() throws { try CustodyEngine.openBao("resume", folder) }

    deinit { _ = try? CustodyEngine.openBao("stop", folder) }
}
