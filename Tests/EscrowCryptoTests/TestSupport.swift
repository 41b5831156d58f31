import Foundation
import Testing

@testable import EscrowCrypto

/// Obviously fake Sign in with Apple user identifiers.
enum FakeUser {
    static let first = "000000.test0000000000000000000000000000.0001"
    static let second = "000000.test0000000000000000000000000000.0002"
}

/// Runs `body` and returns the code of the `CryptoError` it threw, or nil when it threw nothing (or another error).
func cryptoErrorCode<T>(_ body: () throws -> T) -> CryptoError.Code? {
    cryptoError(body)?.code
}

/// Runs `body` and returns the `CryptoError` it threw, or nil when it threw nothing (or another error).
func cryptoError<T>(_ body: () throws -> T) -> CryptoError? {
    do {
        _ = try body()
        return nil
    } catch {
        return error as? CryptoError
    }
}

/// The stored byte fields of a row, for tampering tests.
enum RowField: String, CaseIterable, Sendable {
    case publicKey, sealedProfile, sealedKey, mac

    var keyPath: WritableKeyPath<SealedEscrow, [UInt8]> {
        switch self {
        case .publicKey: \.publicKey
        case .sealedProfile: \.sealedProfile
        case .sealedKey: \.sealedKey
        case .mac: \.mac
        }
    }
}

extension Keyring {
    /// A new escrow of `text` for the first fake user.
    func sealFake(_ text: String) throws -> SealedEscrow {
        try seal(plaintext: secret(text), id: .random(), blindIndex: blindIndex(userIdentifier: FakeUser.first))
    }
}

func bytes(hex: String) -> [UInt8] {
    Hex.decode(hex)!
}

func secret(_ text: String) -> SecretBytes {
    SecretBytes(copying: Array(text.utf8))
}

func string(_ secret: SecretBytes) -> String {
    secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
}

/// A fresh temporary directory, removed after `body`.
func withTemporaryDirectory<R>(_ body: (String) throws -> R) throws -> R {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("escrow-crypto-tests-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    return try body(directory)
}

func fileMode(_ path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return (attributes[.posixPermissions] as! NSNumber).intValue
}

func setFileMode(_ path: String, _ mode: Int) throws {
    try FileManager.default.setAttributes([.posixPermissions: NSNumber(value: mode)], ofItemAtPath: path)
}

/// A keyring with fixed index and row keys (0x00...0x1f and 0x20...0x3f), for known-answer tests.
func fixedKeyKeyring() -> Keyring {
    let generated = Keyring.generate(now: Date(timeIntervalSince1970: 1_700_000_000))
    return Keyring(
        masterKeys: generated.masterKeys,
        activeVersion: 1,
        indexKey: SecretBytes(copying: Array(0..<32)),
        rowKey: SecretBytes(copying: Array(32..<64)),
        isPublicOnly: false
    )
}

func base64(_ secret: SecretBytes) -> String {
    secret.withUnsafeBytes { Data($0).base64EncodedString() }
}
