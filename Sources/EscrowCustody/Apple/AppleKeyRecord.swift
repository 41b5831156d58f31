public import Crypto
public import EscrowCrypto
import Foundation

/// Where Apple's key is and what it is: the file `apple key import` writes beside the keyring
/// (`<keyring>.apple-key`, mode 0600, JSON) and every later use reads. It holds no secret: the key id, the team id,
/// the custody (a PKCS#11 or Transit key's location, or the path of a 0600 `.p8`) and the public key.
public struct AppleKeyRecord: Sendable, Equatable {
    /// Where the key is kept.
    public enum Custody: Sendable, Equatable {
        /// A 0600 `.p8` file, signing in this process (the weakest).
        case file(path: String)
        /// A PKCS#11 token; ``KeyCustody/PKCS11/key`` is the EC private key's label.
        case pkcs11(KeyCustody.PKCS11)
        /// OpenBao/Vault Transit; ``KeyCustody/Transit/key`` is the `ecdsa-p256` key's name.
        case transit(KeyCustody.Transit)

        /// `file`, `pkcs11` or `transit`: the word of `--custody`.
        public var kind: String {
            switch self {
            case .file: "file"
            case .pkcs11: "pkcs11"
            case .transit: "transit"
            }
        }

        /// Where the key is, in words (never the key).
        public var location: String {
            switch self {
            case .file(let path): "file \(path) (weaker: the key is in a plain file and in this process's memory)"
            case .pkcs11(let pkcs11): KeyCustody.pkcs11(pkcs11).engine
            case .transit(let transit): KeyCustody.transit(transit).engine
            }
        }
    }

    public var keyID: String
    public var teamID: String
    public var custody: Custody
    public var publicKey: P256.Signing.PublicKey

    public init(keyID: String, teamID: String, custody: Custody, publicKey: P256.Signing.PublicKey) {
        self.keyID = keyID
        self.teamID = teamID
        self.custody = custody
        self.publicKey = publicKey
    }

    public static func == (left: Self, right: Self) -> Bool {
        left.keyID == right.keyID && left.teamID == right.teamID && left.custody == right.custody
            && left.publicKey.derRepresentation == right.publicKey.derRepresentation
    }

    /// The public key in PEM (SubjectPublicKeyInfo), for `apple key show`.
    public var publicKeyPEM: String { publicKey.pemRepresentation }

    /// The public key's fingerprint: `SHA256:` and the hex SHA-256 of its DER.
    public var fingerprint: String { AppleP8Key.fingerprint(publicKey) }

    /// The record's path for the keyring at `keyringPath`.
    public static func path(besideKeyring keyringPath: String) -> String { keyringPath + ".apple-key" }

    /// The signer of the key's custody; credentials (the PKCS#11 PIN) are read from `environment` at each use.
    public func signer(environment: [String: String]) throws(EscrowCrypto.CryptoError) -> any AppleClientSecretSigner {
        switch custody {
        case .file(let path): try AppleKeyFileSigner(path: path)
        case .pkcs11(let pkcs11): PKCS11AppleKeySigner(pkcs11, environment: environment)
        case .transit(let transit): TransitAppleKeySigner(transit, environment: environment)
        }
    }

    /// The file's JSON: `format`, `keyId`, `teamId`, `custody` (`kind` and its fields), `publicKey` (base64 DER).
    private struct File: Codable {
        static let format = "profile-escrow-apple-key 1"
        struct Custody: Codable {
            var kind: String
            var path: String?
            var module: String?
            var token: String?
            var key: String?
            var address: String?
            var mount: String?
            var caFile: String?
        }
        var format: String
        var keyId: String
        var teamId: String
        var custody: Custody
        var publicKey: String
    }

    /// Writes the record at `path` (mode 0600, by a rename), refusing to replace one that is there.
    public func write(path: String) throws(EscrowCrypto.CryptoError) {
        let custody: File.Custody =
            switch self.custody {
            case .file(let file): File.Custody(kind: "file", path: file)
            case .pkcs11(let p): File.Custody(kind: "pkcs11", module: p.module, token: p.token, key: p.key)
            case .transit(let t):
                File.Custody(kind: "transit", key: t.key, address: t.address, mount: t.mount, caFile: t.caFile)
            }
        let file = File(
            format: File.format,
            keyId: keyID,
            teamId: teamID,
            custody: custody,
            publicKey: publicKey.derRepresentation.base64EncodedString()
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        guard !FileManager.default.fileExists(atPath: path) else {
            throw EscrowCrypto.CryptoError(
                code: .keyringExists,
                message: "\(path) already records an Apple key: remove it first to import another"
            )
        }
        let temporary = path + ".tmp-\(ProcessInfo.processInfo.processIdentifier)"
        do {
            let data = try encoder.encode(file) + Data("\n".utf8)
            guard
                FileManager.default.createFile(
                    atPath: temporary,
                    contents: data,
                    attributes: [.posixPermissions: 0o600]
                )
            else { throw CocoaError(.fileWriteUnknown) }
            guard link(temporary, path) == 0 else { throw CocoaError(.fileWriteFileExists) }
            unlink(temporary)
        } catch {
            unlink(temporary)
            throw EscrowCrypto.CryptoError(code: .keyringIO, message: "cannot write \(path)")
        }
    }

    /// Reads the record at `path`.
    public static func read(path: String) throws(EscrowCrypto.CryptoError) -> Self {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw EscrowCrypto.CryptoError(
                code: .keyringNotFound,
                message: "no Apple key recorded at \(path): run `profile-escrow apple key import`"
            )
        }
        let malformed = EscrowCrypto.CryptoError(code: .keyringMalformed, message: "\(path) is not an Apple key record")
        guard let file = try? JSONDecoder().decode(File.self, from: data), file.format == File.format,
            let der = Data(base64Encoded: file.publicKey),
            let publicKey = try? P256.Signing.PublicKey(derRepresentation: der)
        else { throw malformed }
        let fields = file.custody
        let custody: Custody
        switch fields.kind {
        case "file":
            guard let path = fields.path else { throw malformed }
            custody = .file(path: path)
        case "pkcs11":
            guard let module = fields.module, let token = fields.token, let key = fields.key else { throw malformed }
            custody = .pkcs11(KeyCustody.PKCS11(module: module, token: token, key: key))
        case "transit":
            guard let address = fields.address, let mount = fields.mount, let key = fields.key else { throw malformed }
            custody = .transit(KeyCustody.Transit(address: address, mount: mount, key: key, caFile: fields.caFile))
        default: throw malformed
        }
        return AppleKeyRecord(keyID: file.keyId, teamID: file.teamId, custody: custody, publicKey: publicKey)
    }
}
