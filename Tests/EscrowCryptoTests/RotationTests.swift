import Foundation
import Testing

@testable import EscrowCrypto

@Suite("Rotation, rewrap and retirement")
struct RotationTests {
    @Test func rotateRewrapRetire() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/keyring"
            let version1 = Keyring.generate(now: Date(timeIntervalSince1970: 1_700_000_000))
            let index = version1.blindIndex(userIdentifier: FakeUser.first)
            let old = try version1.seal(plaintext: secret("sealed under v1"), id: .random(), blindIndex: index)
            let oldToRewrap = try version1.seal(plaintext: secret("rewrapped"), id: .random(), blindIndex: index)
            #expect(old.keyVersion == 1)

            let version2 = try version1.rotated(now: Date(timeIntervalSince1970: 1_700_000_500))
            #expect(version2.activeVersion == 2)
            #expect(version2.keys.map(\.version) == [1, 2])
            #expect(version2.keys.allSatisfy { $0.hasSecretKey })
            #expect(version2.blindIndex(userIdentifier: FakeUser.first) == index)
            let new = try version2.seal(plaintext: secret("sealed under v2"), id: .random(), blindIndex: index)
            #expect(new.keyVersion == 2)
            #expect(string(try version2.open(old)) == "sealed under v1")
            #expect(string(try version2.open(new)) == "sealed under v2")

            let rewrapped = try version2.rewrap(oldToRewrap)
            #expect(rewrapped.keyVersion == 2)
            #expect(rewrapped.id == oldToRewrap.id)
            #expect(rewrapped.blindIndex == oldToRewrap.blindIndex)
            #expect(rewrapped.publicKey == oldToRewrap.publicKey)
            #expect(rewrapped.sealedProfile == oldToRewrap.sealedProfile)
            #expect(rewrapped.sealedKey != oldToRewrap.sealedKey)
            #expect(rewrapped.mac != oldToRewrap.mac)
            #expect(string(try version2.open(rewrapped)) == "rewrapped")
            #expect(try version2.rewrap(rewrapped) == rewrapped)

            let retired = try version2.retiring(version: 1)
            #expect(retired.keys.map(\.hasSecretKey) == [false, true])
            #expect(retired.keys.map(\.publicKey) == version2.keys.map(\.publicKey))
            try retired.write(path: path, overwrite: false)
            let text = try String(contentsOfFile: path, encoding: .utf8)
            #expect(!text.contains(base64(version1.masterKeys[0].secretKey!)))
            #expect(text.contains("\nkey 1 1700000000 \(Data(version1.keys[0].publicKey).base64EncodedString()) -\n"))

            let loaded = try Keyring.load(path: path)
            #expect(!loaded.isPublicOnly)
            #expect(loaded.keys.map(\.hasSecretKey) == [false, true])
            #expect(cryptoErrorCode { try loaded.open(old) } == .secretKeyUnavailable)
            #expect(cryptoErrorCode { try loaded.rewrap(old) } == .secretKeyUnavailable)
            #expect(string(try loaded.open(rewrapped)) == "rewrapped")
            #expect(string(try loaded.open(new)) == "sealed under v2")
        }
    }

    @Test func retiringRefusesActiveAndUnknownVersions() throws {
        let keyring = try Keyring.generate().rotated(now: Date())
        #expect(cryptoErrorCode { try keyring.retiring(version: 2) } == .keyVersionActive)
        #expect(cryptoErrorCode { try keyring.retiring(version: 3) } == .unknownKeyVersion)
        #expect(cryptoErrorCode { try keyring.retiring(version: 0) } == .unknownKeyVersion)
        let retired = try keyring.retiring(version: 1)
        // Retiring twice is harmless.
        #expect(try retired.retiring(version: 1).keys.map(\.hasSecretKey) == [false, true])
    }

    @Test func rotationVersionIsMaxPlusOne() throws {
        let keyring = try Keyring.generate().rotated(now: Date()).rotated(now: Date()).retiring(version: 2)
        #expect(keyring.activeVersion == 3)
        #expect(try keyring.rotated(now: Date()).activeVersion == 4)
    }

    @Test func rewrapRejectsTamperedRows() throws {
        let version1 = Keyring.generate()
        var sealed = try version1.seal(
            plaintext: secret("x"),
            id: .random(),
            blindIndex: version1.blindIndex(userIdentifier: FakeUser.first)
        )
        sealed.sealedKey[3] ^= 1
        #expect(cryptoErrorCode { try version1.rotated(now: Date()).rewrap(sealed) } == .ciphertextInvalid)
    }

    @Test func rowFromANewerKeyringNamesTheUnknownVersion() throws {
        let version1 = Keyring.generate()
        let version2 = try version1.rotated(now: Date())
        let sealed = try version2.seal(
            plaintext: secret("x"),
            id: .random(),
            blindIndex: version2.blindIndex(userIdentifier: FakeUser.first)
        )
        #expect(cryptoErrorCode { try version1.open(sealed) } == .unknownKeyVersion)
    }
}
