import Crypto
public import EscrowCrypto
import Foundation

extension AppleKeyRecord {
    /// `apple key import`: reads Apple's `.p8` at `p8Path`, puts the key into `custody` (a PKCS#11 token, Transit;
    /// or, for a file, keeps it where it is, which must then be 0600), checks that the custody signs with it (a
    /// signature verified with the `.p8`'s public key), and writes the record to `recordPath`. Refuses before
    /// touching the custody when a record is already there.
    public static func importKey(
        p8Path: String,
        keyID: String,
        teamID: String,
        into custody: Custody,
        recordPath: String,
        environment: [String: String]
    ) async throws(EscrowCrypto.CryptoError) -> AppleKeyRecord {
        guard !FileManager.default.fileExists(atPath: recordPath) else {
            throw EscrowCrypto.CryptoError(
                code: .keyringExists,
                message: "\(recordPath) already records an Apple key: remove it first to import another"
            )
        }
        let key = try AppleP8Key.read(path: p8Path, privateFile: custody.kind == "file")
        let record = AppleKeyRecord(keyID: keyID, teamID: teamID, custody: custody, publicKey: key.publicKey)
        switch custody {
        case .file: break
        case .pkcs11(let pkcs11): try await PKCS11AppleKeySigner(pkcs11, environment: environment).importKey(key)
        case .transit(let transit): try await TransitAppleKeySigner(transit, environment: environment).importKey(key)
        }
        try await record.checkSigning(environment: environment)
        try record.write(path: recordPath)
        return record
    }

    /// Signs a probe through the custody and verifies it with the recorded public key: the custody holds this key.
    public func checkSigning(environment: [String: String]) async throws(EscrowCrypto.CryptoError) {
        let signer = try signer(environment: environment)
        let probe = Array("profile-escrow apple key probe".utf8)
        let signature = try await signer.sign(probe)
        guard AppleP8Key.verifies(signature, for: probe, with: publicKey) else {
            throw EscrowCrypto.CryptoError(
                code: .custodyRefused,
                message: "\(signer.custody): its signature does not verify with the recorded public key"
            )
        }
    }
}
