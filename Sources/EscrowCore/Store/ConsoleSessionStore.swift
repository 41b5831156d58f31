public import Foundation

/// A console session as the store keeps it: the hash of its cookie's value and of the bearer token that signed in,
/// never either secret. Whoever reads the table can neither present the cookie nor sign in.
public struct ConsoleSessionRecord: Sendable, Equatable {
    /// BLAKE2b-256 of the cookie's value.
    public var idHash: [UInt8]
    /// The hash of the access token that signed in (as ``AccessTokenRecord/hash``): the session is that token's.
    public var tokenHash: [UInt8]
    public var createdAt: Date
    /// The last request seen (the console records it at most once a minute).
    public var lastSeenAt: Date
    /// The absolute end: the session ends then, used or not.
    public var expiresAt: Date

    public init(idHash: [UInt8], tokenHash: [UInt8], createdAt: Date, lastSeenAt: Date, expiresAt: Date) {
        self.idHash = idHash
        self.tokenHash = tokenHash
        self.createdAt = createdAt
        self.lastSeenAt = lastSeenAt
        self.expiresAt = expiresAt
    }
}

/// A page answering a console form, held for the one GET its redirect makes, sealed under a key only the session's
/// cookie derives: the store holds bytes it cannot open.
public struct HeldConsolePage: Sendable, Equatable {
    /// The HTTP status to answer with.
    public var status: Int
    public var sealed: [UInt8]

    public init(status: Int, sealed: [UInt8]) {
        self.status = status
        self.sealed = sealed
    }
}

/// The console's sessions, shared by every node of the store: a restart signs nobody out and any node serves any
/// session. The caller checks the session's token again at each request (a revoked token ends its sessions on every
/// node at its next request); the store keeps the expiries and sweeps what has ended.
public protocol ConsoleSessionStore: Sendable {
    /// Records a new session. The token's oldest sessions beyond ``ConsoleSessionLimits/perToken`` end with it, so
    /// a loop of sign-ins cannot grow the table.
    func createConsoleSession(_ session: ConsoleSessionRecord) async throws

    /// The session of `idHash` while it lives at `now`: before its absolute end and seen less than `idle` ago. Nil
    /// otherwise (an ended session is left to ``sweepConsoleSessions(now:idle:)``).
    func consoleSession(idHash: [UInt8], now: Date, idle: TimeInterval) async throws -> ConsoleSessionRecord?

    /// Records a request of the session at `now` (its idle clock starts again).
    func touchConsoleSession(idHash: [UInt8], at now: Date) async throws

    /// Ends the session of `idHash` and drops its held pages.
    func endConsoleSession(idHash: [UInt8]) async throws

    /// Holds `page` under `resultHash` for the session of `sessionHash` until `expiresAt`. The session's oldest held
    /// pages beyond ``ConsoleSessionLimits/heldPerSession`` are dropped.
    func holdConsolePage(
        _ page: HeldConsolePage,
        resultHash: [UInt8],
        sessionHash: [UInt8],
        expiresAt: Date
    ) async throws

    /// The page held under `resultHash` for the session of `sessionHash`, removed as it is read (one use); nil when
    /// there is none, it is another session's, or it expired before `now`.
    func takeConsolePage(resultHash: [UInt8], sessionHash: [UInt8], now: Date) async throws -> HeldConsolePage?

    /// Deletes sessions past their absolute end or unused for `idle`, with their held pages, and held pages past
    /// their minute. Returns how many sessions were deleted.
    @discardableResult
    func sweepConsoleSessions(now: Date, idle: TimeInterval) async throws -> Int
}

/// The bounds of the console's sessions: the store keeps the counts, the console and the sweep the times.
public enum ConsoleSessionLimits {
    /// The most a session lives, used or not.
    public static let lifetime: TimeInterval = 8 * 3600
    /// The most a session may sit unused.
    public static let idle: TimeInterval = 30 * 60
    /// Sessions one token keeps at once; the oldest end first.
    public static let perToken = 32
    /// Pages one session holds for their GET at once.
    public static let heldPerSession = 4
}

extension ConsoleSessionRecord {
    /// Whether the session lives at `now`: before its absolute end, and seen less than `idle` before.
    public func isLive(at now: Date, idle: TimeInterval) -> Bool {
        now < expiresAt && now.timeIntervalSince(lastSeenAt) < idle
    }
}
