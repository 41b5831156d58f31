import EscrowCrypto
import Foundation

/// A custody engine's credential (a Transit token, a PKCS#11 PIN): from an environment variable, or from a file
/// named by a second variable (`..._FILE`), read again at each use, so a renewed token file is picked up. Never from
/// a command-line option (it would show in `ps` and shell history), never recorded in the keyring file, never in a
/// message.
struct CustodyCredential: Sendable {
    /// The variable holding the credential itself, e.g. `PROFILE_ESCROW_TRANSIT_TOKEN`.
    let variable: String
    /// What it is, for messages: `Transit token`, `PKCS#11 PIN`.
    let name: String
    let environment: [String: String]

    /// The variable naming a file that holds the credential.
    var fileVariable: String { variable + "_FILE" }

    /// The credential's bytes (a file's trailing newline and spaces removed), in secret memory.
    func read(engine: String) throws(CryptoError) -> SecretBytes {
        if let value = environment[variable], !value.isEmpty {
            return SecretBytes(copying: Array(value.utf8))
        }
        guard let path = environment[fileVariable], !path.isEmpty else {
            throw CryptoError(
                code: .custodyRefused,
                message: "\(engine): no \(name): set \(variable), or \(fileVariable) to a file that holds it"
            )
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CryptoError(code: .custodyRefused, message: "\(engine): cannot read the \(name) file \(path)")
        }
        var bytes = [UInt8](data)
        defer { for index in bytes.indices { bytes[index] = 0 } }
        var end = bytes.count
        while end > 0, [0x0A, 0x0D, 0x20, 0x09].contains(bytes[end - 1]) { end -= 1 }
        guard end > 0 else {
            throw CryptoError(code: .custodyRefused, message: "\(engine): the \(name) file \(path) is empty")
        }
        return SecretBytes(copying: bytes[0..<end])
    }
}
