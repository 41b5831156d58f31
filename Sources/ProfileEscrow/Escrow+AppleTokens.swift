public import EscrowCore
public import EscrowCrypto
public import Foundation
import Logging

extension Escrow {
    /// The Apple token exchanges beside the escrows, when the store keeps them (SQLite's and PostgreSQL's do): the
    /// sign-in store's, since a sign-in's capture queues its code in its own transaction.
    public var appleTokenStore: (any AppleTokenStore)? { signIns as? any AppleTokenStore }

    /// The exchange of a sign-in's authorization code, to queue with the capture of its profile (``capture(_:verified:emailVerified:appleExchange:actor:)``,
    /// ``completeSignIn(_:profile:emailVerified:transferSub:appleExchange:in:actor:)``): the code is sealed with the
    /// escrow, to the active master key version (a copy of the database does not reveal it), due at once, over at
    /// `now` plus the code's life.
    public func appleExchange(
        code: String,
        clientID: String,
        redirectURI: String?,
        now: Date
    ) throws -> AppleCodeExchange {
        AppleCodeExchange(
            code: SecretBytes(copying: Array(code.utf8)),
            codeHash: Self.appleCodeHash(code),
            clientID: clientID,
            redirectURI: redirectURI,
            now: now
        )
    }

    /// The key of a code's exchange: an unkeyed hash, enough for a random code that lives five minutes.
    public static func appleCodeHash(_ code: String) -> [UInt8] {
        Hashing.blake2b256(Array("apple-code ".utf8) + Array(code.utf8))
    }

    /// The code an exchange sealed, opened with this keyring.
    public func openAppleCode(_ exchange: AppleTokenExchange) throws -> String {
        var code = try keyring.openAppleCode(
            exchange.sealedCode,
            keyVersion: exchange.keyVersion,
            label: Hex.encode(exchange.codeHash)
        )
        defer { for index in code.indices { code[index] = 0 } }
        return String(decoding: code, as: UTF8.self)
    }

    /// The `appleTokens` member of `record`'s replay body: the refresh token an ended exchange gave (opened with the
    /// escrow's own key), else Apple's refusal, else ``AppleTokenExchange/timedOut`` for an exchange past the code's
    /// life; nil when no code of this escrow was exchanged here, or while its exchange runs.
    public func appleTokens(for record: EscrowRecord, at now: Date) async throws -> AppleTokens? {
        guard let store = appleTokenStore else { return nil }
        let exchanges = try await store.appleExchanges(escrowID: record.id)
        // The newest ended exchange with tokens wins, then the newest refusal.
        for exchange in exchanges.reversed() {
            if case .tokens(let sealed) = exchange.outcome {
                guard let tokens = try openedAppleTokens(sealed, of: record) else {
                    // The escrow itself opened (its delivery opened it first): the tokens were sealed to a key pair
                    // it no longer has. The profile is delivered, and the backend told, rather than held forever.
                    logger.error(
                        "the refresh token of this escrow's exchange cannot be opened; delivered without it",
                        metadata: ["escrow.id": "\(record.id)", "escrow.index": "\(record.blindIndex.prefixHex)"]
                    )
                    return .error(AppleTokenExchange.tokensUnreadable)
                }
                return .refreshToken(tokens.withUnsafeBytes { String(decoding: $0, as: UTF8.self) })
            }
        }
        for exchange in exchanges.reversed() {
            if case .refused(let code) = exchange.outcome { return .error(code) }
        }
        if exchanges.contains(where: { now >= $0.expiresAt }) { return .error(AppleTokenExchange.timedOut) }
        return nil
    }

    /// The tokens sealed into `record`'s escrow; nil when their box does not open with its key.
    private func openedAppleTokens(_ sealed: [UInt8], of record: EscrowRecord) throws(CryptoError) -> SecretBytes? {
        do {
            return try keyring.openAppleTokens(sealed, of: record.sealed)
        } catch {
            guard error.code == .ciphertextInvalid else { throw error }
            return nil
        }
    }

    /// Which of `ids` have Apple token exchanges, running or ended (none when the store keeps no exchanges).
    public func escrowIDsWithAppleExchanges(among ids: [EscrowID]) async throws -> Set<EscrowID> {
        guard let store = appleTokenStore else { return [] }
        return try await store.escrowIDsWithAppleExchanges(among: ids)
    }

    /// The latest expiry of the exchanges of escrow `id` still running at `now`; nil when none runs.
    public func runningAppleExchangeExpiry(for id: EscrowID, at now: Date) async throws -> Date? {
        guard let store = appleTokenStore else { return nil }
        return try await store.appleExchanges(escrowID: id).filter { !$0.isSettled(at: now) }.map(\.expiresAt).max()
    }

    /// Waits, polling every half second, until no exchange of escrow `id` runs or `limit` passes, so that a reader of
    /// the escrow (a confirmation, `replay`) gets the tokens an exchange is about to give.
    public func awaitAppleExchange(for id: EscrowID, limit: Date) async throws {
        while let until = try await runningAppleExchangeExpiry(for: id, at: configuration.clock.now()),
            configuration.clock.now() < min(until, limit)
        {
            try await Task.sleep(for: .milliseconds(500))
        }
    }
}

extension Escrow {
    /// ``replay(userIdentifier:actor:)`` with the escrow's `appleTokens`: when the sign-in's code is still being
    /// exchanged, waits for it (at most until the code's expiry) so that the reader gets the refresh token.
    public func replayWithAppleTokens(
        userIdentifier: String,
        actor: AuditActor = .library
    ) async throws -> (EscrowPlaintext, AppleTokens?) {
        guard
            let record = try await userRecord(blindIndex(userIdentifier), ifMalformed: .quarantine, actor: actor).record
        else {
            throw EscrowError(.notFound, "no escrow is held for this user")
        }
        try await awaitAppleExchange(for: record.id, limit: .distantFuture)
        let plaintext = try await open(record, actor: actor)
        return (plaintext, try await appleTokens(for: record, at: clock.now()))
    }

    /// ``confirm(userIdentifier:actor:)``, answering the escrow's `appleTokens` read just before the purge: a
    /// confirmation that arrives while the sign-in's code is being exchanged waits for it (at most until the code's
    /// expiry), so a refresh token is never purged unseen. A node that cannot open escrows (public-only keyring)
    /// confirms without reading them.
    public func confirmWithAppleTokens(
        userIdentifier: String,
        actor: AuditActor = .library
    ) async throws -> (purged: Bool, appleTokens: AppleTokens?) {
        var tokens: AppleTokens?
        if !isCaptureOnly,
            let record = try await userRecord(blindIndex(userIdentifier), ifMalformed: .quarantine, actor: actor).record
        {
            try await awaitAppleExchange(for: record.id, limit: .distantFuture)
            tokens = try await appleTokens(for: record, at: clock.now())
        }
        return (try await confirm(userIdentifier: userIdentifier, actor: actor), tokens)
    }
}

extension Escrow {
    /// Queues the revocation of `token` at Apple for `clientID`: the token sealed to the active master key version,
    /// due at once. Durable before it returns; answers the revocation's id.
    public func queueAppleRevocation(token: String, tokenTypeHint: String, clientID: String) async throws -> String {
        guard let store = signIns as? any AppleRevocationStore else {
            throw EscrowError(.invalidConfiguration, "this store keeps no Apple token revocations")
        }
        let id = "rev_" + Hex.encode(Hashing.randomBytes(count: 16))
        let (keyVersion, sealed) = try keyring.sealNotification(Array(token.utf8), webhookID: "apple-revocation-" + id)
        let now = clock.now()
        try await store.queueAppleRevocation(
            AppleRevocation(
                id: id,
                clientID: clientID,
                tokenTypeHint: tokenTypeHint,
                keyVersion: keyVersion,
                sealedToken: sealed,
                nextAttemptAt: now,
                createdAt: now
            )
        )
        return id
    }

    /// The token a revocation sealed, opened with this keyring.
    public func openAppleRevocationToken(_ revocation: AppleRevocation) throws -> String {
        let token = try keyring.openNotification(
            revocation.sealedToken,
            keyVersion: revocation.keyVersion,
            webhookID: "apple-revocation-" + revocation.id
        )
        return String(decoding: token, as: UTF8.self)
    }
}

/// An Apple authorization code to queue for its exchange with the capture of the profile it came with
/// (``Escrow/appleExchange(code:clientID:redirectURI:now:)``). The code stays in locked memory until the capture seals
/// it beside its escrow, with the escrow's own keys (`Keyring.seal(plaintext:id:blindIndex:reserve:appleCode:)`).
public struct AppleCodeExchange: Sendable {
    let code: SecretBytes
    let codeHash: [UInt8]
    let clientID: String
    let redirectURI: String?
    let now: Date

    /// The outbox entry, given the code sealed and the id of the escrow that holds the profile (the capture's, or the
    /// live one it left in place).
    func entry(keyVersion: UInt32, sealedCode: [UInt8]) -> @Sendable (EscrowID) -> AppleTokenExchange {
        let exchange = self
        return { escrowID in
            AppleTokenExchange(
                codeHash: exchange.codeHash,
                escrowID: escrowID,
                clientID: exchange.clientID,
                redirectURI: exchange.redirectURI,
                keyVersion: keyVersion,
                sealedCode: sealedCode,
                nextAttemptAt: exchange.now,
                createdAt: exchange.now,
                expiresAt: exchange.now.addingTimeInterval(AppleTokenExchange.codeLifetime)
            )
        }
    }
}
