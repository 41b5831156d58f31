public import EscrowCrypto
public import Foundation

/// One authorization code waiting to be redeemed at Apple's token endpoint for the escrow its sign-in captured: the
/// code sealed to a master key version (never in clear), the client it was issued to, and, once the exchange ended,
/// what came of it. Kept until the escrow is purged (the store deletes it with the escrow's row).
public struct AppleTokenExchange: Sendable, Equatable {
    /// What an ended exchange gave.
    public enum Outcome: Sendable, Equatable {
        /// Apple's tokens (the refresh token), sealed into the escrow (`Keyring.sealAppleTokens(_:into:)`).
        case tokens(sealed: [UInt8])
        /// Apple's error code (`invalid_grant`, `invalid_client`, …), or ``AppleTokenExchange/timedOut`` when no
        /// exchange could be made within the code's life.
        case refused(String)
    }

    /// What names an exchange: its escrow and a hash of its code (``key``). A code is queued once for its escrow,
    /// whatever captured it; it belongs to one user, who has one escrow at a time, so it is exchanged once.
    public struct Key: Sendable, Hashable {
        public var escrowID: EscrowID
        public var codeHash: [UInt8]

        public init(escrowID: EscrowID, codeHash: [UInt8]) {
            self.escrowID = escrowID
            self.codeHash = codeHash
        }
    }

    /// A hash of the code (BLAKE2b-256 of `"apple-code " || code`).
    public var codeHash: [UInt8]
    public var escrowID: EscrowID
    /// The client id the code was issued to (the Services ID of the web flow, an app's bundle id).
    public var clientID: String
    /// The `redirect_uri` of the web flow's authorization, which Apple wants again; nil for an app's code.
    public var redirectURI: String?
    /// The master key version ``sealedCode`` is sealed to.
    public var keyVersion: UInt32
    /// The code, sealed (`Keyring.seal(plaintext:id:blindIndex:reserve:appleCode:)`); erased (empty) once the exchange
    /// ended.
    public var sealedCode: [UInt8]
    /// Exchange attempts so far: a claim counts one.
    public var attempts: Int
    /// When the entry is next due; while it is claimed, the end of the claim's lease.
    public var nextAttemptAt: Date
    public var createdAt: Date
    /// The code's own end: ``codeLifetime`` after the capture.
    public var expiresAt: Date
    /// Nil while the exchange runs.
    public var outcome: Outcome?
    public var endedAt: Date?

    public init(
        codeHash: [UInt8],
        escrowID: EscrowID,
        clientID: String,
        redirectURI: String?,
        keyVersion: UInt32,
        sealedCode: [UInt8],
        attempts: Int = 0,
        nextAttemptAt: Date,
        createdAt: Date,
        expiresAt: Date,
        outcome: Outcome? = nil,
        endedAt: Date? = nil
    ) {
        self.codeHash = codeHash
        self.escrowID = escrowID
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.keyVersion = keyVersion
        self.sealedCode = sealedCode
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.outcome = outcome
        self.endedAt = endedAt
    }

    /// How long Apple's authorization code lives (seconds): five minutes.
    public static let codeLifetime: Double = 300

    /// The outcome of an exchange that found no answer from Apple within the code's life.
    public static let timedOut = "exchange_timed_out"

    /// What a delivery says of a refresh token that no longer opens: sealed to the escrow's key pair before the
    /// escrow's profile was sealed again under a new one (an email change, by a release that did not keep the pair).
    public static let tokensUnreadable = "tokens_unreadable"

    /// The exchange's name in its store.
    public var key: Key { Key(escrowID: escrowID, codeHash: codeHash) }

    /// Whether the exchange is over at `now`: ended, or past the code's life (a delivery waits no longer).
    public func isSettled(at now: Date) -> Bool { outcome != nil || now >= expiresAt }
}

/// Where authorization codes wait for their exchange, beside the escrows: a sign-in's capture queues its code in its
/// own transaction, any node's exchanger claims it with a lease (as the notification outbox is claimed), and the
/// outcome is kept with the escrow until its purge. While an escrow's exchange runs its first delivery is held (its
/// due time is the code's expiry), and ending the exchange makes it due at once.
///
/// The `EscrowStoreConformance` module holds the checks every implementation must pass.
public protocol AppleTokenStore: Sendable {
    /// Up to `limit` running exchanges due at `now`, the longest due first, each claimed: its attempts counted (the
    /// returned entries carry the new count) and not due again before `now + lease` seconds.
    func claimAppleExchanges(at now: Date, limit: Int, lease: Double) async throws -> [AppleTokenExchange]

    /// Sets when a claimed exchange is due again, when no later claim took it (its attempts are still `attempts`);
    /// returns whether it did.
    func rescheduleAppleExchange(_ key: AppleTokenExchange.Key, attempts: Int, at next: Date) async throws -> Bool

    /// Ends a claimed, running exchange (its attempts still `attempts`) with `outcome`, erasing its sealed code, and
    /// makes its escrow due at `now` when its first delivery was held for it. Returns whether it did.
    func endAppleExchange(
        _ key: AppleTokenExchange.Key,
        attempts: Int,
        outcome: AppleTokenExchange.Outcome,
        at now: Date
    ) async throws -> Bool

    /// The exchanges of an escrow, running or ended, the oldest first; none once the escrow is purged.
    func appleExchanges(escrowID: EscrowID) async throws -> [AppleTokenExchange]

    /// Which of `escrowIDs` have exchanges, running or ended: one read for a claimed batch of deliveries, so that
    /// delivering an escrow without any (nearly all of them) reads nothing more.
    func escrowIDsWithAppleExchanges(among escrowIDs: [EscrowID]) async throws -> Set<EscrowID>

    /// How many exchanges are running.
    func runningAppleExchangeCount() async throws -> Int
}

extension AppleTokenExchange.Outcome {
    /// The stored columns of an outcome: the sealed tokens, or the error code.
    package var stored: (tokens: [UInt8]?, error: String?) {
        switch self {
        case .tokens(let sealed): (sealed, nil)
        case .refused(let code): (nil, code)
        }
    }
}
