public import EscrowCrypto
public import Foundation

/// A client secret for Apple's `/auth/token` and `/auth/revoke`: an ES256 JWT. A credential: its description says
/// nothing of it, and it is never logged, stored or put in a message.
public struct AppleClientSecret: Sendable, CustomStringConvertible {
    /// The JWT, for the `client_secret` form field only.
    public let jwt: String
    /// When it was minted (its `iat`).
    public let issuedAt: Date
    /// Its `exp`.
    public let expiresAt: Date

    public var description: String { "AppleClientSecret(redacted, expires \(expiresAt))" }
}

/// Mints Apple's client secrets with the team's key, wherever it is kept, and caches them: at most one mint per
/// client id per ``remintInterval``, so the custody engine is called once an hour, never per sign-in. Callers that
/// ask while a mint is under way share it.
///
/// The JWT is Apple's documented one: header `alg` `ES256` and `kid` (the key id); claims `iss` (the team id),
/// `iat`, `exp`, `aud` `https://appleid.apple.com`, `sub` (the client id: the Services ID or the app's bundle id).
public actor AppleClientSecrets {
    /// The longest lifetime Apple accepts: six months (15,777,000 seconds).
    public static let longestLifetime = Duration.seconds(15_777_000)
    /// How long a minted secret is reused.
    public static let remintInterval = Duration.seconds(3_600)

    public nonisolated let teamID: String
    public nonisolated let keyID: String
    let signer: any AppleClientSecretSigner
    /// From `iat` to `exp`: a day by default, far more than the hour a secret is used, far less than Apple's limit,
    /// so a secret that leaks is worth a day at most.
    let lifetime: Duration
    let now: @Sendable () -> Date

    private var minted: [String: AppleClientSecret] = [:]
    private var minting: [String: Task<Result<AppleClientSecret, CryptoError>, Never>] = [:]

    /// - Parameter now: the clock (injected, so tests move it).
    public init(
        teamID: String,
        keyID: String,
        signer: any AppleClientSecretSigner,
        lifetime: Duration = .seconds(86_400),
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        precondition(
            lifetime > Self.remintInterval && lifetime <= Self.longestLifetime,
            "a client secret lives more than an hour and at most six months"
        )
        self.teamID = teamID
        self.keyID = keyID
        self.signer = signer
        self.lifetime = lifetime
        self.now = now
    }

    /// A secret for `clientID`: the cached one when it was minted less than ``remintInterval`` ago (by this
    /// clock), else a new one; when a mint for this client id is under way, its result.
    public func secret(for clientID: String) async throws(CryptoError) -> AppleClientSecret {
        let now = self.now()
        if let secret = minted[clientID], secret.issuedAt <= now,
            now < secret.issuedAt.addingTimeInterval(Self.seconds(Self.remintInterval))
        {
            return secret
        }
        if let task = minting[clientID] { return try await task.value.get() }
        let task = Task { [signer, teamID, keyID, lifetime] in
            await Self.mint(
                signer: signer,
                teamID: teamID,
                keyID: keyID,
                clientID: clientID,
                at: now,
                lifetime: lifetime
            )
        }
        minting[clientID] = task
        let result = await task.value
        minting[clientID] = nil
        if case .success(let secret) = result { minted[clientID] = secret }
        return try result.get()
    }

    private struct Header: Encodable {
        let alg = "ES256"
        let kid: String
    }

    private struct Claims: Encodable {
        let iss: String
        let iat: Int
        let exp: Int
        let aud = "https://appleid.apple.com"
        let sub: String
    }

    private static func mint(
        signer: any AppleClientSecretSigner,
        teamID: String,
        keyID: String,
        clientID: String,
        at now: Date,
        lifetime: Duration
    ) async -> Result<AppleClientSecret, CryptoError> {
        // Whole seconds, as JWT's NumericDate; `exp` from the same rounded `iat`.
        let issuedAt = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        let expiresAt = issuedAt.addingTimeInterval(seconds(lifetime))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do throws(CryptoError) {
            let header = try encode(Header(kid: keyID), encoder)
            let claims = try encode(
                Claims(
                    iss: teamID,
                    iat: Int(issuedAt.timeIntervalSince1970),
                    exp: Int(expiresAt.timeIntervalSince1970),
                    sub: clientID
                ),
                encoder
            )
            let signingInput = header + "." + claims
            let signature = try await signer.sign(Array(signingInput.utf8))
            return .success(
                AppleClientSecret(
                    jwt: signingInput + "." + Base64URL.encode(signature),
                    issuedAt: issuedAt,
                    expiresAt: expiresAt
                )
            )
        } catch {
            return .failure(error)
        }
    }

    private static func encode(_ value: some Encodable, _ encoder: JSONEncoder) throws(CryptoError) -> String {
        do {
            return Base64URL.encode(Array(try encoder.encode(value)))
        } catch {
            throw CryptoError(code: .custodyRefused, message: "cannot encode a client secret's JSON")
        }
    }

    private static func seconds(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
