import Crypto
import EscrowCrypto
import EscrowCustody
import Foundation
import NIOConcurrencyHelpers
import Testing

/// Client secrets: Apple's JWT, verified here with the key's public half, minted at most once an hour per client id
/// on an injected clock, one mint shared by concurrent callers.
struct AppleClientSecretsTests {
    /// A signer with the key in memory that counts its signatures and may take its time, as a remote engine does.
    final class CountingSigner: AppleClientSecretSigner {
        let key = P256.Signing.PrivateKey()
        let delay: Duration
        let signatures = NIOLockedValueBox(0)
        init(delay: Duration = .zero) { self.delay = delay }

        var custody: String { "memory (test)" }

        func sign(_ message: [UInt8]) async throws(EscrowCrypto.CryptoError) -> [UInt8] {
            signatures.withLockedValue { $0 += 1 }
            try? await Task.sleep(for: delay)
            return Array(try! key.signature(for: message).rawRepresentation)
        }
    }

    /// A clock the test moves.
    final class TestClock: Sendable {
        let time = NIOLockedValueBox(Date(timeIntervalSince1970: 1_900_000_000))
        func now() -> Date { time.withLockedValue { $0 } }
        func advance(minutes: Double) { time.withLockedValue { $0.addTimeInterval(minutes * 60) } }
    }

    static func decode(_ part: Substring) throws -> [String: Any] {
        var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        text += String(repeating: "=", count: (4 - text.count % 4) % 4)
        let data = try #require(Data(base64Encoded: text))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test func aSecretIsApplesJWTSignedByTheKey() async throws {
        let signer = CountingSigner()
        let clock = TestClock()
        let secrets = AppleClientSecrets(teamID: "FAKETEAM01", keyID: "FAKEKEY001", signer: signer, now: clock.now)
        let secret = try await secrets.secret(for: "com.example.fake.web")
        #expect(!secret.description.contains(secret.jwt))

        let parts = secret.jwt.split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 3)
        let header = try Self.decode(parts[0])
        #expect(header["alg"] as? String == "ES256")
        #expect(header["kid"] as? String == "FAKEKEY001")
        let claims = try Self.decode(parts[1])
        #expect(claims["iss"] as? String == "FAKETEAM01")
        #expect(claims["sub"] as? String == "com.example.fake.web")
        #expect(claims["aud"] as? String == "https://appleid.apple.com")
        let issued = try #require(claims["iat"] as? Int)
        let expires = try #require(claims["exp"] as? Int)
        #expect(issued == 1_900_000_000)
        #expect(expires - issued == 86_400)
        #expect(expires - issued <= 15_777_000)

        var signature = String(parts[2]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(
            of: "_",
            with: "/"
        )
        signature += String(repeating: "=", count: (4 - signature.count % 4) % 4)
        let raw = try #require(Data(base64Encoded: signature))
        let ecdsa = try P256.Signing.ECDSASignature(rawRepresentation: raw)
        let signingInput = Data((parts[0] + "." + parts[1]).utf8)
        #expect(signer.key.publicKey.isValidSignature(ecdsa, for: signingInput))
        #expect(!P256.Signing.PrivateKey().publicKey.isValidSignature(ecdsa, for: signingInput))
    }

    @Test func oneSignaturePerHourPerClientID() async throws {
        let signer = CountingSigner()
        let clock = TestClock()
        let secrets = AppleClientSecrets(teamID: "FAKETEAM01", keyID: "FAKEKEY001", signer: signer, now: clock.now)
        let first = try await secrets.secret(for: "com.example.fake.web")
        clock.advance(minutes: 59)
        #expect(try await secrets.secret(for: "com.example.fake.web").jwt == first.jwt)
        #expect(signer.signatures.withLockedValue { $0 } == 1)

        // Another client id has a secret of its own.
        let app = try await secrets.secret(for: "com.example.fake.app")
        #expect(app.jwt != first.jwt)
        #expect(signer.signatures.withLockedValue { $0 } == 2)

        clock.advance(minutes: 1)
        let renewed = try await secrets.secret(for: "com.example.fake.web")
        #expect(renewed.jwt != first.jwt)
        #expect(renewed.issuedAt == first.issuedAt.addingTimeInterval(3_600))
        #expect(signer.signatures.withLockedValue { $0 } == 3)
        // The app's, minted a minute later, is still fresh.
        #expect(try await secrets.secret(for: "com.example.fake.app").jwt == app.jwt)
        #expect(signer.signatures.withLockedValue { $0 } == 3)
    }

    @Test func concurrentCallersShareOneMint() async throws {
        let signer = CountingSigner(delay: .milliseconds(200))
        let secrets = AppleClientSecrets(
            teamID: "FAKETEAM01",
            keyID: "FAKEKEY001",
            signer: signer,
            now: TestClock().now
        )
        let jwts = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<40 {
                group.addTask { try await secrets.secret(for: "com.example.fake.\(index % 2)").jwt }
            }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(jwts.count == 40)
        #expect(Set(jwts).count == 2)
        #expect(signer.signatures.withLockedValue { $0 } == 2)
    }

    @Test func aFailedMintIsNotCachedAndNamesNoSecret() async throws {
        struct Refusing: AppleClientSecretSigner {
            let calls = NIOLockedValueBox(0)
            var custody: String { "refusing (test)" }
            func sign(_ message: [UInt8]) async throws(EscrowCrypto.CryptoError) -> [UInt8] {
                calls.withLockedValue { $0 += 1 }
                throw EscrowCrypto.CryptoError(code: .custodyUnavailable, message: "refusing (test): down")
            }
        }
        let signer = Refusing()
        let secrets = AppleClientSecrets(
            teamID: "FAKETEAM01",
            keyID: "FAKEKEY001",
            signer: signer,
            now: TestClock().now
        )
        for _ in 0..<2 {
            let error = await #expect(throws: EscrowCrypto.CryptoError.self) {
                try await secrets.secret(for: "com.example.fake.web")
            }
            #expect(error?.code == .custodyUnavailable)
        }
        #expect(signer.calls.withLockedValue { $0 } == 2)
    }
}
