public import Foundation

/// A token to revoke at Apple's `/auth/revoke`, as the backend asked at an account's deletion: the token sealed to a
/// master key version (erased once the revocation ended), the client it was issued to, and the outcome.
public struct AppleRevocation: Sendable, Equatable {
    /// How a revocation ended.
    public enum Outcome: Sendable, Equatable {
        /// Apple answered `200`.
        case revoked
        /// Not revoked after the last attempt: Apple's last error code, or `unavailable` when Apple never answered.
        case failed(String)
    }

    /// `rev_` and 32 hex digits: the id `POST /v1/apple/revocations` answers.
    public var id: String
    public var clientID: String
    /// `refresh_token` or `access_token`.
    public var tokenTypeHint: String
    public var keyVersion: UInt32
    public var sealedToken: [UInt8]
    public var attempts: Int
    /// When it is next due; while it is claimed, the end of the claim's lease.
    public var nextAttemptAt: Date
    public var createdAt: Date
    public var outcome: Outcome?
    public var endedAt: Date?

    public init(
        id: String,
        clientID: String,
        tokenTypeHint: String,
        keyVersion: UInt32,
        sealedToken: [UInt8],
        attempts: Int = 0,
        nextAttemptAt: Date,
        createdAt: Date,
        outcome: Outcome? = nil,
        endedAt: Date? = nil
    ) {
        self.id = id
        self.clientID = clientID
        self.tokenTypeHint = tokenTypeHint
        self.keyVersion = keyVersion
        self.sealedToken = sealedToken
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.createdAt = createdAt
        self.outcome = outcome
        self.endedAt = endedAt
    }
}

/// Where revocations wait until Apple took them, beside the escrows: queued durably (the token sealed), claimed with a
/// lease by any node's revoker, ended once with its audit event (`apple-token-revoked`, `apple-revocation-failed`)
/// in the same transaction.
///
/// The `EscrowStoreConformance` module holds the checks every implementation must pass.
public protocol AppleRevocationStore: Sendable {
    /// Stores a new revocation; fails when one with its id exists.
    func queueAppleRevocation(_ revocation: AppleRevocation) async throws

    /// Up to `limit` running revocations due at `now`, the longest due first, each claimed: its attempts counted and
    /// not due again before `now + lease` seconds.
    func claimAppleRevocations(at now: Date, limit: Int, lease: Double) async throws -> [AppleRevocation]

    /// Sets when a claimed revocation is due again, when no later claim took it; returns whether it did.
    func rescheduleAppleRevocation(id: String, attempts: Int, at next: Date) async throws -> Bool

    /// Ends a claimed, running revocation (its attempts still `attempts`), erasing its sealed token, and appends its
    /// audit event by `actor` in the same transaction. Returns whether it did.
    func endAppleRevocation(
        id: String,
        attempts: Int,
        outcome: AppleRevocation.Outcome,
        at now: Date,
        actor: AuditActor
    ) async throws -> Bool

    /// The revocation with this id; nil when none is stored.
    func appleRevocation(id: String) async throws -> AppleRevocation?

    /// How many revocations the store holds by state: still being sent, revoked, failed (one grouped read).
    func appleRevocationCounts() async throws -> AppleRevocationCounts
}

/// The store's revocations by state, for the console: counts only, never a token or a client id.
public struct AppleRevocationCounts: Sendable, Equatable {
    /// Queued or being retried: not yet taken or given up.
    public var pending: Int
    public var revoked: Int
    public var failed: Int

    public init(pending: Int = 0, revoked: Int = 0, failed: Int = 0) {
        self.pending = pending
        self.revoked = revoked
        self.failed = failed
    }

    /// Counts from `(stored outcome, count)` rows: a nil outcome is a pending revocation.
    package init(rows: [(outcome: String?, count: Int)]) {
        self.init()
        for (outcome, count) in rows {
            switch outcome {
            case nil: pending += count
            case "revoked": revoked += count
            default: failed += count
            }
        }
    }

    /// The grouped read both stores make.
    package static let sql = "SELECT outcome, COUNT(*) FROM apple_revocation GROUP BY outcome"
}

extension AppleRevocation {
    /// The stored columns of an outcome: `revoked` or `failed`, and the error code.
    package static func stored(_ outcome: Outcome) -> (outcome: String, error: String?) {
        switch outcome {
        case .revoked: ("revoked", nil)
        case .failed(let code): ("failed", code)
        }
    }

    /// The outcome of stored columns; nil while running.
    package static func outcome(stored: String?, error: String?) -> Outcome? {
        switch stored {
        case "revoked": .revoked
        case "failed": .failed(error ?? "unavailable")
        default: nil
        }
    }
}
