public import EscrowCrypto
public import Foundation

/// A sign-in attempt as a store holds it: hashes of its state, nonce and binding (never the secrets), the name of the
/// return URL, its life, and once used, the hash of the ticket it issued with the ticket's sealed result.
///
/// A browser starts an attempt (its binding is a cookie's value), or an app does (``startedByApp``: its binding is
/// the attempt secret the app was given, which its ticket's redeem requires).
public struct SignInAttempt: Sendable, Equatable {
    /// The attempt's key: a hash of its `state`.
    public var stateHash: [UInt8]
    public var nonceHash: [UInt8]
    public var bindingHash: [UInt8]
    /// The name of the return URL the sign-in ends at (never the URL itself: the allow-list holds those).
    public var returnName: String
    public var createdAt: Date
    public var expiresAt: Date
    /// When the callback used it; nil while it is live.
    public var usedAt: Date?
    /// The app's own value for this sign-in (`appState` at start: for example a hash of its session cookie, which
    /// the app's backend compares at redeem to refuse a ticket this browser did not start), sealed under a key only
    /// the attempt's `state` gives; nil when the app sent none.
    public var sealedAppState: [UInt8]?
    /// Started by an app (`POST /v1/apple/attempts`), not a browser: its callback needs no cookie, and its ticket
    /// redeems only with the attempt secret, whose hash is ``bindingHash``.
    public var startedByApp: Bool

    public init(
        stateHash: [UInt8],
        nonceHash: [UInt8],
        bindingHash: [UInt8],
        returnName: String,
        createdAt: Date,
        expiresAt: Date,
        usedAt: Date? = nil,
        sealedAppState: [UInt8]? = nil,
        startedByApp: Bool = false
    ) {
        self.stateHash = stateHash
        self.nonceHash = nonceHash
        self.bindingHash = bindingHash
        self.returnName = returnName
        // At whole milliseconds, as the stores keep them: an attempt held in memory since its start is judged as the
        // store would judge it.
        self.createdAt = Self.wholeMilliseconds(createdAt)
        self.expiresAt = Self.wholeMilliseconds(expiresAt)
        self.usedAt = usedAt.map(Self.wholeMilliseconds)
        self.sealedAppState = sealedAppState
        self.startedByApp = startedByApp
    }

    private static func wholeMilliseconds(_ date: Date) -> Date {
        Timestamp.date(unixMilliseconds: Timestamp.unixMilliseconds(date))
    }

    /// The most bytes of `appState` an app may pass through a sign-in.
    public static let maximumAppStateSize = 256

    /// Whether a callback first received at `time` may still use it.
    public func isLive(at time: Date) -> Bool { usedAt == nil && time < expiresAt }

    /// Whether a completion with this binding hash may use it: its own binding, compared in constant time, or none
    /// at all for an attempt an app started (Apple's callback from a Custom Tab carries no cookie).
    public func accepts(bindingHash: [UInt8]?) -> Bool {
        guard let bindingHash else { return startedByApp }
        return Hashing.constantTimeEqual(self.bindingHash, bindingHash)
    }

    /// How long after its expiry an unused attempt is kept: a callback first received in time, whose resubmission
    /// waited for the store, is judged by when it was first received for this long (seconds).
    public static let resubmissionGrace: Double = 30 * 60
}

/// The single-use ticket a completed sign-in issues: its hash, and the sign-in's result sealed under a key only the
/// ticket gives (a copy of the database reveals neither). Stored in its attempt's row, and found by the attempt's
/// state hash (``SignInTicketKey``).
public struct SignInTicket: Sendable, Equatable {
    public var ticketHash: [UInt8]
    public var sealedResult: [UInt8]
    public var expiresAt: Date

    public init(ticketHash: [UInt8], sealedResult: [UInt8], expiresAt: Date) {
        self.ticketHash = ticketHash
        self.sealedResult = sealedResult
        self.expiresAt = expiresAt
    }
}

/// What finds a ticket in the store: the state hash of the attempt that issued it, and the ticket's own hash, which
/// must match the one stored in that attempt's row. A ticket is found by its attempt's key, so storing one writes no
/// index of its own. A ticket a store kept before tickets named their attempt (its hash alone, indexed) has no state
/// hash, and is found by its hash.
public struct SignInTicketKey: Sendable, Equatable {
    public var stateHash: [UInt8]?
    public var ticketHash: [UInt8]

    /// A ticket of the attempt whose state hash is `stateHash`.
    public init(stateHash: [UInt8], ticketHash: [UInt8]) {
        self.stateHash = stateHash
        self.ticketHash = ticketHash
    }

    /// A ticket stored by its hash alone, before tickets named their attempt.
    public init(ticketHash: [UInt8]) {
        self.stateHash = nil
        self.ticketHash = ticketHash
    }
}

/// What a callback asks of ``SignInStore/completeSignIn(_:capture:actor:lifecycle:)``.
public struct SignInCompletionRequest: Sendable {
    public var stateHash: [UInt8]
    /// The hash of the browser's cookie or of the app's attempt secret; nil for Apple's callback of an attempt an app
    /// started, which comes from a Custom Tab without the starter's cookie (only such an attempt accepts nil).
    public var bindingHash: [UInt8]?
    public var now: Date
    /// When the service first received the callback: the attempt must have been live then. `now`, unless a
    /// resubmission carries the service's stamp of an earlier receipt.
    public var receivedAt: Date
    /// The ticket to issue, given the id of the escrow that holds the profile (nil when none was captured); made in
    /// the transaction: after the capture, or before it for the escrow about to be captured when ``attempt`` is used
    /// first (and again, should the capture keep another).
    public var ticket: @Sendable (EscrowID?) -> SignInTicket
    /// The exchange of the sign-in's authorization code, given the id of the escrow that holds the profile; queued in
    /// the transaction when a profile was captured (nil: the code is not exchanged here).
    public var appleExchange: (@Sendable (EscrowID) -> AppleTokenExchange)?
    /// The attempt as the caller read it before (from the store, or as it started it), when it did: a live one of
    /// this binding is used without being read again. The store still decides: it uses the attempt only when it is
    /// unused and stored as given (binding, starter, expiry); one used, gone or different is read, and refused as
    /// the store has it.
    public var attempt: SignInAttempt?

    public init(
        stateHash: [UInt8],
        bindingHash: [UInt8]?,
        now: Date,
        receivedAt: Date? = nil,
        attempt: SignInAttempt? = nil,
        appleExchange: (@Sendable (EscrowID) -> AppleTokenExchange)? = nil,
        ticket: @escaping @Sendable (EscrowID?) -> SignInTicket
    ) {
        self.stateHash = stateHash
        self.bindingHash = bindingHash
        self.now = now
        self.receivedAt = receivedAt ?? now
        self.attempt = attempt
        self.appleExchange = appleExchange
        self.ticket = ticket
    }
}

/// What a callback's completion did.
public enum SignInCompletion: Sendable, Equatable {
    /// The attempt is now used and its ticket issued; the capture's outcome, when a profile was given.
    case completed(SignInAttempt, CaptureOutcome?)
    /// No attempt has this state.
    case unknown
    /// The attempt exists but is used or past its expiry: nothing captured.
    case expired(SignInAttempt)
    /// The browser binding does not match: nothing captured, the attempt left live for its own browser.
    case bindingMismatch(SignInAttempt)
}

/// A redeemed ticket: the sign-in's sealed result and where it ends; given once.
public struct SignInRedemption: Sendable, Equatable {
    public var sealedResult: [UInt8]
    public var returnName: String

    public init(sealedResult: [UInt8], returnName: String) {
        self.sealedResult = sealedResult
        self.returnName = returnName
    }
}

/// Where web sign-in attempts live, beside the escrows: a callback's capture and the use of its attempt are one
/// transaction, so a reload of the callback never captures twice.
///
/// The `EscrowStoreConformance` module holds the checks every implementation must pass.
public protocol SignInStore: Sendable {
    /// Stores a new attempt; fails when one with the same state hash exists.
    func createSignInAttempt(_ attempt: SignInAttempt) async throws

    /// The attempt with this state hash, used or not; nil when none is stored.
    func signInAttempt(stateHash: [UInt8]) async throws -> SignInAttempt?

    /// In one transaction: when the attempt is live at `request.now` and its binding matches, marks it used, stores
    /// the ticket, and captures `record` (when given) as ``EscrowRecordStore/capture(_:actor:lifecycle:)`` does. Durable
    /// before it returns.
    func completeSignIn(
        _ request: SignInCompletionRequest,
        capture record: EscrowRecord?,
        actor: AuditActor,
        lifecycle: EscrowLifecycle
    ) async throws -> SignInCompletion

    /// The ticket's sealed result, once: a ticket redeemed before, past its expiry or unknown gives nil. The sealed
    /// result is erased as it is given. A ticket of an attempt ``SignInAttempt/startedByApp`` is given only when
    /// `starterHash` is its binding hash (the attempt secret's), and left unredeemed otherwise.
    func redeemSignInTicket(
        _ key: SignInTicketKey,
        starterHash: [UInt8]?,
        at now: Date
    ) async throws
        -> SignInRedemption?

    /// The ticket's sealed result while it is unredeemed and not past its expiry at `now`, left in place: an app that
    /// lost its capture's answer is given the same ticket again.
    func unredeemedSignInTicket(_ key: SignInTicketKey, at now: Date) async throws -> [UInt8]?

    /// Deletes every attempt past its expiry at `now` whose ticket, if any, is past its own; returns how many.
    func sweepSignInAttempts(at now: Date) async throws -> Int
}

extension SignInStore {
    /// Redeems a ticket of a browser-started attempt (one started by an app needs its attempt secret's hash).
    public func redeemSignInTicket(_ key: SignInTicketKey, at now: Date) async throws -> SignInRedemption? {
        try await redeemSignInTicket(key, starterHash: nil, at: now)
    }
}
