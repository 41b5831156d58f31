import Crypto
import EscrowCrypto
import EscrowCustody
import EscrowTestSupport
import Foundation
import Testing

/// `apple key import | show` through the real binary, into a real SoftHSM2 token, a real OpenBao and a 0600 file;
/// then client secrets minted from the record, verified with the `.p8`'s public key. No output holds the key, the PIN
/// or the token.
struct AppleKeyCommandTests {
    static let ids = ["--key-id", "FAKEKEY001", "--team-id", "FAKETEAM01"]

    /// What must never show: the PIN, and the `.p8`'s key in any form.
    static func expectNothingSecret(
        _ texts: [String],
        key: P256.Signing.PrivateKey,
        pin: String? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let body = key.pemRepresentation.split(separator: "\n").filter { !$0.hasPrefix("-----") }
        for text in texts {
            #expect(!text.contains("PRIVATE KEY"), sourceLocation: sourceLocation)
            #expect(!body.contains { text.contains($0) }, sourceLocation: sourceLocation)
            #expect(!text.contains(Hex.encode(Array(key.rawRepresentation))), sourceLocation: sourceLocation)
            #expect(!text.contains(key.rawRepresentation.base64EncodedString()), sourceLocation: sourceLocation)
            if let pin { #expect(!text.contains(pin), sourceLocation: sourceLocation) }
        }
    }

    static func mintedSecretVerifies(
        _ record: AppleKeyRecord,
        environment: [String: String],
        key: P256.Signing.PublicKey
    ) async throws -> Bool {
        let secrets = AppleClientSecrets(
            teamID: record.teamID,
            keyID: record.keyID,
            signer: try record.signer(environment: environment)
        )
        let jwt = try await secrets.secret(for: "com.example.fake.web").jwt
        let parts = jwt.split(separator: ".")
        let signature = try #require(Base64URL.decode(Array(parts[2].utf8)))
        return AppleP8Key.verifies(signature, for: Array((parts[0] + "." + parts[1]).utf8), with: key)
    }

    @Test func importIntoTheTokenThenShowThenMint() async throws {
        let directory = TemporaryDirectory()
        let (p8, key) = try AppleKeySignerTests.p8(in: directory, mode: 0o644)
        let engine = try CustodyEngine.make(.pkcs11, key: "apple-" + Hex.encode(Hashing.randomBytes(count: 4)))
        let keyring = directory.path + "/keyring"
        let imported = try await ProfileEscrowCLI.run(
            ["apple", "key", "import", "--p8", p8] + Self.ids + engine.arguments + ["--keyring", keyring],
            environment: engine.environment,
            in: directory.path
        )
        try #require(imported.status == 0, "import: \(imported.stderr)")
        #expect(imported.stdout.contains("still holds the key"))

        let recordPath = keyring + ".apple-key"
        let mode = try FileManager.default.attributesOfItem(atPath: recordPath)[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)
        let recordText = try String(contentsOfFile: recordPath, encoding: .utf8)

        // `show` needs no PIN: it reads the record only.
        let shown = try await ProfileEscrowCLI.run(["apple", "key", "show", "--keyring", keyring], in: directory.path)
        #expect(shown.status == 0)
        #expect(shown.stdout.contains("key id: FAKEKEY001"))
        #expect(shown.stdout.contains("team id: FAKETEAM01"))
        #expect(shown.stdout.contains("custody: pkcs11"))
        #expect(shown.stdout.contains(AppleP8Key.fingerprint(key.publicKey)))
        #expect(shown.stdout.contains(key.publicKey.pemRepresentation))
        Self.expectNothingSecret(
            [imported.stdout, imported.stderr, shown.stdout, shown.stderr, recordText],
            key: key,
            pin: engine.credential
        )

        let record = try AppleKeyRecord.read(path: recordPath)
        guard case .pkcs11(let pkcs11) = record.custody else {
            Issue.record("not pkcs11")
            return
        }
        #expect(pkcs11 == KeyCustody.PKCS11(module: pkcs11.module, token: pkcs11.token, key: pkcs11.key))
        #expect(try await Self.mintedSecretVerifies(record, environment: engine.environment, key: key.publicKey))
        // The .p8 can go: the token signs alone.
        try FileManager.default.removeItem(atPath: p8)
        #expect(try await Self.mintedSecretVerifies(record, environment: engine.environment, key: key.publicKey))

        // A second import is refused before it touches the token.
        let again = try await ProfileEscrowCLI.run(
            ["apple", "key", "import", "--p8", p8] + Self.ids + engine.arguments + ["--keyring", keyring],
            environment: engine.environment,
            in: directory.path
        )
        #expect(again.status != 0)
        #expect(again.stderr.contains("already records an Apple key"))
    }

    @Test func importIntoTransitThenShowThenMint() async throws {
        let directory = TemporaryDirectory()
        let (p8, key) = try AppleKeySignerTests.p8(in: directory, mode: 0o644)
        let address = try CustodyEngine.variable("PROFILE_ESCROW_TEST_BAO_ADDR")
        // The root token: importing needs transit/wrapping_key and transit/keys/<name>/import.
        let environment = [
            "PROFILE_ESCROW_TRANSIT_TOKEN": try CustodyEngine.variable("PROFILE_ESCROW_TEST_BAO_ROOT_TOKEN")
        ]
        let keyring = directory.path + "/keyring"
        let name = "apple-" + Hex.encode(Hashing.randomBytes(count: 4))
        let imported = try await ProfileEscrowCLI.run(
            ["apple", "key", "import", "--p8", p8] + Self.ids
                + ["--custody", "transit", "--transit-address", address, "--transit-key", name, "--keyring", keyring],
            environment: environment,
            in: directory.path
        )
        try #require(imported.status == 0, "import: \(imported.stderr)")
        let shown = try await ProfileEscrowCLI.run(["apple", "key", "show", "--keyring", keyring], in: directory.path)
        #expect(shown.stdout.contains("custody: transit: transit key \"\(name)\" at \(address)"))
        #expect(shown.stdout.contains(AppleP8Key.fingerprint(key.publicKey)))
        Self.expectNothingSecret(
            [imported.stdout, imported.stderr, shown.stdout, shown.stderr],
            key: key,
            pin: environment["PROFILE_ESCROW_TRANSIT_TOKEN"]
        )
        let record = try AppleKeyRecord.read(path: keyring + ".apple-key")
        #expect(try await Self.mintedSecretVerifies(record, environment: environment, key: key.publicKey))
    }

    @Test func aFileCustodyNeedsA0600File() async throws {
        let directory = TemporaryDirectory()
        let (p8, key) = try AppleKeySignerTests.p8(in: directory, mode: 0o644)
        let keyring = directory.path + "/keyring"
        let arguments =
            ["apple", "key", "import", "--p8", p8] + Self.ids + ["--custody", "file", "--keyring", keyring]
        let refused = try await ProfileEscrowCLI.run(arguments, in: directory.path)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("chmod 600"))
        #expect(!FileManager.default.fileExists(atPath: keyring + ".apple-key"))

        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: p8)
        let imported = try await ProfileEscrowCLI.run(arguments, in: directory.path)
        try #require(imported.status == 0, "import: \(imported.stderr)")
        let shown = try await ProfileEscrowCLI.run(["apple", "key", "show", "--keyring", keyring], in: directory.path)
        #expect(shown.stdout.contains("custody: file: file \(p8) (weaker"))
        Self.expectNothingSecret([imported.stdout, imported.stderr, shown.stdout, shown.stderr], key: key)

        let record = try AppleKeyRecord.read(path: keyring + ".apple-key")
        #expect(try await Self.mintedSecretVerifies(record, environment: [:], key: key.publicKey))
    }

    @Test func badIdsAndMissingOptionsAreUsageErrors() async throws {
        let directory = TemporaryDirectory()
        for arguments in [
            ["--key-id", "short", "--team-id", "FAKETEAM01", "--custody", "file"],
            ["--key-id", "FAKEKEY001", "--team-id", "FAKETEAM01", "--custody", "pkcs11"],
            ["--key-id", "FAKEKEY001", "--team-id", "FAKETEAM01", "--custody", "file", "--pkcs11-token", "t"],
            ["--key-id", "FAKEKEY001", "--team-id", "FAKETEAM01", "--custody", "transit", "--transit-key", "k"],
            [
                "--key-id", "FAKEKEY001", "--team-id", "FAKETEAM01", "--custody", "transit", "--transit-key", "k",
                "--transit-address", "http://bao.example.invalid:8200",
            ],
        ] {
            let result = try await ProfileEscrowCLI.run(
                ["apple", "key", "import", "--p8", directory.path + "/none.p8"] + arguments,
                in: directory.path
            )
            #expect(result.status == 2, "\(arguments): \(result.stderr)")
        }
        let missing = try await ProfileEscrowCLI.run(
            ["apple", "key", "show", "--keyring", directory.path + "/k"],
            in: directory.path
        )
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("apple key import"))
    }
}
