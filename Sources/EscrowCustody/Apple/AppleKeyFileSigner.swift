public import Crypto
public import EscrowCrypto

/// Apple's key kept in a 0600 `.p8` file and signing in this process: the weakest custody (the key is in the
/// file, in backups of it, and in this process's memory), for setups without an HSM or OpenBao/Vault.
public struct AppleKeyFileSigner: AppleClientSecretSigner {
    public let path: String
    private let key: P256.Signing.PrivateKey

    /// Reads the key; refuses a file its group or others may read.
    public init(path: String) throws(EscrowCrypto.CryptoError) {
        self.path = path
        self.key = try AppleP8Key.read(path: path, privateFile: true)
    }

    public var custody: String { "file \(path)" }

    public var publicKey: P256.Signing.PublicKey { key.publicKey }

    public func sign(_ message: [UInt8]) async throws(EscrowCrypto.CryptoError) -> [UInt8] {
        do {
            return Array(try key.signature(for: message).rawRepresentation)
        } catch {
            throw EscrowCrypto.CryptoError(code: .custodyRefused, message: "\(custody): cannot sign")
        }
    }
}
