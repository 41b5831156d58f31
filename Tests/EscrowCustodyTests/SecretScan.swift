import EscrowCrypto
import Foundation

/// The master secret keys of a keyring, as a plain keyring file would hold them, and a byte scan for them.
enum SecretScan {
    /// The secret keys (raw bytes) of an unwrapped keyring in custody: written out of custody to a scratch file,
    /// whose `key` lines are read back.
    static func masterSecrets(of keyring: Keyring, scratch: String) throws -> [[UInt8]] {
        try keyring.outOfCustody().write(path: scratch, overwrite: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        return try masterSecrets(inPlainFile: scratch)
    }

    /// The secret keys of a plain (format 1) keyring file.
    static func masterSecrets(inPlainFile path: String) throws -> [[UInt8]] {
        let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self)
        return text.split(separator: "\n").compactMap { line -> [UInt8]? in
            let fields = line.split(separator: " ")
            guard fields.count == 5, fields[0] == "key", fields[4] != "-" else { return nil }
            return Data(base64Encoded: String(fields[4])).map { [UInt8]($0) }
        }
    }

    /// Whether `file` holds any of `secrets` as raw bytes, base64 or hex (lower or upper case).
    static func file(_ path: String, holdsAnyOf secrets: [[UInt8]]) throws -> Bool {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        for secret in secrets {
            let forms: [[UInt8]] = [
                secret, Array(Data(secret).base64EncodedString().utf8), Array(Hex.encode(secret).utf8),
                Array(Hex.encode(secret).uppercased().utf8),
                // The first 16 bytes alone: a partial copy counts too.
                Array(secret.prefix(16)),
            ]
            for form in forms where contains(bytes, form) { return true }
        }
        return false
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if Array(haystack[start..<(start + needle.count)]) == needle { return true }
        }
        return false
    }

    /// The lines of a keyring file.
    static func lines(_ path: String) throws -> [String] {
        String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self)
            .split(separator: "\n").map(String.init)
    }

    /// Writes `lines` back (mode 0600 kept: the file is rewritten in place).
    static func write(_ lines: [String], to path: String) throws {
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o600)
    }
}
