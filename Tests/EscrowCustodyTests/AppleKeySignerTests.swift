import Crypto
import EscrowCrypto
import EscrowCustody
import EscrowTestSupport
import Foundation
import Testing

/// Apple's `.p8` key kept in a file and in a real SoftHSM2 token (`scripts/softhsm.sh`): the signatures verify with
/// the public key of the `.p8`, and the token keeps the key in.
struct AppleKeySignerTests {
    /// A fresh `.p8` (PKCS#8 PEM, as Apple hands it out) in a temporary folder, with the given mode.
    static func p8(
        in directory: TemporaryDirectory,
        mode: Int = 0o600
    ) throws -> (path: String, key: P256.Signing.PrivateKey) {
        let key = P256.Signing.PrivateKey()
        let path = directory.path + "/AuthKey_FAKEKEY001.p8"
        try Data(key.pemRepresentation.utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        return (path, key)
    }

    static func pkcs11(
        label: String = "apple-" + Hex.encode(Hashing.randomBytes(count: 4))
    ) throws -> PKCS11AppleKeySigner {
        let engine = try CustodyEngine.make(.pkcs11, key: label)
        guard case .pkcs11(let pkcs11) = engine.custody else {
            throw CustodyEngine.MissingEngine(description: "pkcs11")
        }
        return PKCS11AppleKeySigner(pkcs11, environment: engine.environment)
    }

    static func verifies(_ signature: [UInt8], _ message: [UInt8], _ key: P256.Signing.PublicKey) throws -> Bool {
        key.isValidSignature(try P256.Signing.ECDSASignature(rawRepresentation: signature), for: message)
    }

    @Test func aFileSignerSignsWithTheP8AndRefusesAFileOthersMayRead() async throws {
        let directory = TemporaryDirectory()
        let (path, key) = try Self.p8(in: directory)
        let signer = try AppleKeyFileSigner(path: path)
        let message = Array("header.claims".utf8)
        let signature = try await signer.sign(message)
        #expect(signature.count == 64)
        #expect(try Self.verifies(signature, message, key.publicKey))
        #expect(try !Self.verifies(signature, Array("header.other".utf8), key.publicKey))

        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: path)
        let refusal = try #require(throws: EscrowCrypto.CryptoError.self) { try AppleKeyFileSigner(path: path) }
        #expect(refusal.message.contains("chmod 600"))
        #expect(!refusal.message.contains("PRIVATE KEY"))
    }

    @Test func aP8ImportedIntoTheTokenSignsThereAndCannotLeaveIt() async throws {
        let directory = TemporaryDirectory()
        let (path, key) = try Self.p8(in: directory, mode: 0o644)
        let signer = try Self.pkcs11()
        try await signer.importKey(try AppleP8Key.read(path: path, privateFile: false))
        // The key's value is refused by the token (CKA_VALUE of a sensitive key), checked again on each use.
        try await signer.checkKeyStaysInside()

        let message = Array("eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJGQUtFVEVBTTAxIn0".utf8)
        let first = try await signer.sign(message)
        let second = try await signer.sign(message)
        #expect(first.count == 64)
        #expect(try Self.verifies(first, message, key.publicKey))
        #expect(try Self.verifies(second, message, key.publicKey))
        #expect(try !Self.verifies(first, message, P256.Signing.PrivateKey().publicKey))

        // An import never replaces a key of the same label.
        let again = await #expect(throws: EscrowCrypto.CryptoError.self) {
            try await signer.importKey(P256.Signing.PrivateKey())
        }
        #expect(again?.message.contains("already has") == true)
        #expect(try Self.verifies(try await signer.sign(message), message, key.publicKey))
    }

    @Test func aMissingTokenKeyOrAWrongPinIsACustodyError() async throws {
        let missing = try Self.pkcs11()
        let error = await #expect(throws: EscrowCrypto.CryptoError.self) { try await missing.sign([1, 2, 3]) }
        #expect(error?.message.contains("no EC private key with that label") == true)

        let engine = try CustodyEngine.make(.pkcs11)
        guard case .pkcs11(let pkcs11) = engine.custody else { return }
        let wrongPin = PKCS11AppleKeySigner(pkcs11, environment: engine.wrongCredential)
        let refused = await #expect(throws: EscrowCrypto.CryptoError.self) { try await wrongPin.sign([1, 2, 3]) }
        #expect(refused?.code == .custodyRefused)
        #expect(refused?.message.contains(engine.credential) == false)
    }
}
