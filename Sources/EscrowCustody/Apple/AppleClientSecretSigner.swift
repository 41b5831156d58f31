public import Crypto
public import EscrowCrypto
import Foundation

/// Signs Apple's client secrets (ES256 JWTs) with the team's Sign in with Apple private key, wherever that key is
/// kept: a PKCS#11 token (``PKCS11AppleKeySigner``), OpenBao/Vault Transit, or a 0600 file (``AppleKeyFileSigner``,
/// the weakest). The key never leaves its custody through this protocol: only signatures come out.
public protocol AppleClientSecretSigner: Sendable {
    /// Where the key is, in words for messages and `apple key show` (never the key).
    var custody: String { get }

    /// ES256 over `message` (SHA-256, then ECDSA on P-256): the 64-byte `r || s` a JWS carries.
    func sign(_ message: [UInt8]) async throws(EscrowCrypto.CryptoError) -> [UInt8]
}

/// Apple's `.p8` file: the team's P-256 private key as PKCS#8 in PEM, as Apple's developer site hands it out.
public enum AppleP8Key {
    /// Reads and parses the `.p8` at `path`. With `privateFile`, refuses a file that its group or others may read or
    /// write (the key is kept there, so the file must be 0600 or 0400). The message names the path, never the key.
    public static func read(path: String, privateFile: Bool) throws(EscrowCrypto.CryptoError) -> P256.Signing.PrivateKey
    {
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: path)
        } catch {
            throw EscrowCrypto.CryptoError(code: .custodyRefused, message: "cannot read Apple's key file \(path)")
        }
        if privateFile, let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue, mode & 0o077 != 0 {
            throw EscrowCrypto.CryptoError(
                code: .custodyRefused,
                message: "Apple's key file \(path) may be read by others (mode \(String(mode & 0o777, radix: 8))): "
                    + "chmod 600 it"
            )
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw EscrowCrypto.CryptoError(code: .custodyRefused, message: "cannot read Apple's key file \(path)")
        }
        do {
            return try P256.Signing.PrivateKey(pemRepresentation: String(decoding: data, as: UTF8.self))
        } catch {
            throw EscrowCrypto.CryptoError(
                code: .custodyRefused,
                message: "Apple's key file \(path) is not a P-256 private key in PKCS#8 PEM (a .p8 from Apple)"
            )
        }
    }

    /// Whether `signature` (`r || s`) is ES256 over `message` by `publicKey`'s private key.
    public static func verifies(
        _ signature: [UInt8],
        for message: [UInt8],
        with publicKey: P256.Signing.PublicKey
    ) -> Bool {
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signature) else { return false }
        return publicKey.isValidSignature(signature, for: message)
    }

    /// The public key's fingerprint for display: `SHA256:` and the hex SHA-256 of its DER (SubjectPublicKeyInfo).
    public static func fingerprint(_ publicKey: P256.Signing.PublicKey) -> String {
        "SHA256:" + SHA256.hash(data: publicKey.derRepresentation).map { String(format: "%02x", $0) }.joined()
    }
}
