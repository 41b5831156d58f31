import EscrowCrypto
import EscrowCustody
import EscrowTestSupport
import Foundation
import Testing

/// The custody file format (format 2) over an in-memory engine: what the file holds, what it refuses.
@Suite struct KeyringCustodyFileTests {
    let custody = KeyCustody.transit(KeyCustody.Transit(address: "https://bao.example.invalid:8200", key: "escrow"))

    @Test func aWrappedKeyringFileHoldsNoMasterSecretAndUnwraps() async throws {
        let directory = TemporaryDirectory()
        let engine = FakeCustodian()
        let keyring = try await Keyring.generate().rotated(now: Date()).wrapped(into: custody, by: engine)
        let path = directory.path + "/keyring"
        try keyring.write(path: path, overwrite: false)

        let lines = try SecretScan.lines(path)
        #expect(lines[0] == "profile-escrow-keyring 2")
        #expect(lines[1].hasPrefix("id ") && lines[1].count == 35)
        #expect(lines[2] == "custody transit https://bao.example.invalid:8200 transit escrow -")
        let secrets = try SecretScan.masterSecrets(of: keyring, scratch: directory.path + "/plain")
        #expect(secrets.count == 2)
        #expect(!(try SecretScan.file(path, holdsAnyOf: secrets)))

        let loaded = try Keyring.load(path: path)
        #expect(loaded.isWrapped && loaded.custody == custody)
        #expect(loaded.description.contains("custody: transit"))
        let unwrapped = try await loaded.unwrapped(by: engine)
        #expect(!unwrapped.isWrapped)
        #expect(try SecretScan.masterSecrets(of: unwrapped, scratch: directory.path + "/plain2") == secrets)
    }

    @Test func aBlobMovedToAnotherVersionDoesNotUnwrap() async throws {
        let directory = TemporaryDirectory()
        let engine = FakeCustodian()
        let keyring = try await Keyring.generate().rotated(now: Date()).wrapped(into: custody, by: engine)
        let path = directory.path + "/keyring"
        try keyring.write(path: path, overwrite: false)
        var lines = try SecretScan.lines(path)
        // Swap the wrapped fields of versions 1 and 2 (the last two lines).
        var first = lines[lines.count - 2].split(separator: " ").map(String.init)
        var second = lines[lines.count - 1].split(separator: " ").map(String.init)
        (first[4], second[4]) = (second[4], first[4])
        lines[lines.count - 2] = first.joined(separator: " ")
        lines[lines.count - 1] = second.joined(separator: " ")
        try SecretScan.write(lines, to: path)

        let error = await #expect(throws: CryptoError.self) {
            _ = try await Keyring.load(path: path).unwrapped(by: engine)
        }
        #expect(error?.code == .wrappedKeyInvalid)
    }

    @Test func aNewVersionIsWrappedBeforeItIsWritten() async throws {
        let directory = TemporaryDirectory()
        let engine = FakeCustodian()
        let keyring = try await Keyring.generate().wrapped(into: custody, by: engine)
        let rotated = try keyring.rotated(now: Date())
        do {
            try rotated.write(path: directory.path + "/keyring", overwrite: false)
            Issue.record("a custody keyring with an unwrapped secret was written")
        } catch {
            #expect(error.code == .keyringRefused)
        }
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/keyring"))
        let wrapped = try await rotated.wrappingNewKeys(by: engine)
        try wrapped.write(path: directory.path + "/keyring", overwrite: false)
        let loaded = try await Keyring.load(path: directory.path + "/keyring").unwrapped(by: engine)
        #expect(loaded.activeVersion == 2 && loaded.keys.allSatisfy(\.hasSecretKey))
    }

    @Test func retiringAVersionDropsItsWrappedSecret() async throws {
        let directory = TemporaryDirectory()
        let engine = FakeCustodian()
        let path = directory.path + "/keyring"
        let keyring = try await Keyring.generate().rotated(now: Date()).wrapped(into: custody, by: engine)
        try keyring.write(path: path, overwrite: false)
        let oldBlob = try SecretScan.lines(path)[7].split(separator: " ")[4]
        try keyring.retiring(version: 1).write(path: path, overwrite: true)
        let lines = try SecretScan.lines(path)
        #expect(lines[7].hasSuffix(" -"))
        #expect(!lines.joined().contains(oldBlob))
        let loaded = try await Keyring.load(path: path).unwrapped(by: engine)
        #expect(loaded.keys.map(\.hasSecretKey) == [false, true])
    }

    @Test func aPlainKeyringStaysInFormat1AndAPublicOnlyOneNeedsNoEngine() async throws {
        let directory = TemporaryDirectory()
        let engine = FakeCustodian()
        let plain = Keyring.generate()
        try plain.write(path: directory.path + "/plain", overwrite: false)
        #expect(try SecretScan.lines(directory.path + "/plain")[0] == "profile-escrow-keyring 1")

        let wrapped = try await plain.wrapped(into: custody, by: engine)
        try wrapped.publicOnly().write(path: directory.path + "/public", overwrite: false)
        #expect(try SecretScan.lines(directory.path + "/public")[0] == "profile-escrow-keyring 1")
        let calls = engine.callCount
        // A capture-only node: no engine is named, none is called.
        let capture = try await KeyringCustody.load(path: directory.path + "/public", environment: [:])
        #expect(capture.isPublicOnly && capture.custody == nil)
        #expect(engine.callCount == calls)

        let back = try wrapped.outOfCustody()
        try back.write(path: directory.path + "/back", overwrite: false)
        #expect(try SecretScan.lines(directory.path + "/back")[0] == "profile-escrow-keyring 1")
        #expect(
            try SecretScan.masterSecrets(inPlainFile: directory.path + "/back")
                == SecretScan.masterSecrets(inPlainFile: directory.path + "/plain")
        )
    }

    @Test(arguments: [
        "custody transit https://a transit",
        "custody vault https://a transit k -",
        "custody transit ftp://a transit k -",
        "custody pkcs11 /lib/m.so token",
        "custody pkcs11 /lib/m.so %ZZ key",
        "custody transit https://a transit k - extra",
    ])
    func aMalformedCustodyLineIsRefused(line: String) async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/keyring"
        try await Keyring.generate().wrapped(into: custody, by: FakeCustodian()).write(path: path, overwrite: false)
        var lines = try SecretScan.lines(path)
        lines[2] = line
        try SecretScan.write(lines, to: path)
        let error = #expect(throws: CryptoError.self) { _ = try Keyring.load(path: path) }
        #expect(error?.code == .keyringMalformed)
        #expect(error?.message.contains("line 3") == true)
    }

    @Test func aPKCS11LocationWithSpacesRoundTrips() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/keyring"
        let location = KeyCustody.pkcs11(KeyCustody.PKCS11(module: "/opt/my hsm/p11.so", token: "My Token", key: "k%1"))
        try await Keyring.generate().wrapped(into: location, by: FakeCustodian()).write(path: path, overwrite: false)
        #expect(try SecretScan.lines(path)[2] == "custody pkcs11 /opt/my%20hsm/p11.so My%20Token k%251")
        #expect(try Keyring.load(path: path).custody == location)
    }
}
