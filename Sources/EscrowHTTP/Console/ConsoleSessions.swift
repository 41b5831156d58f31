import EscrowCore
import EscrowCrypto
import Foundation
import HTTPTypes

/// The console's server-side sessions, kept in the store (``ConsoleSessionStore``) so that every node serves every
/// session and a restart signs nobody out. The cookie holds a random id; the store holds its hash and the hash of the
/// token that signed in, never a usable secret. The CSRF token is derived from the cookie's value (an HMAC under it),
/// so it is stored nowhere and only whoever holds the cookie can compute it.
///
/// A form's answer is held in the store too (POST, redirect, GET): the POST answers `303` to `/console/result/<id>`,
/// whose GET, on whichever node, shows the page once. So the browser's history and session-restore files keep a URL
/// with a random id, never a body holding what was typed (a user identifier, a reason) that a reload or a restored
/// tab would post again. The held page is sealed under a key derived from the cookie's value and the result id: the
/// store cannot open it.
struct ConsoleSessions: Sendable {
    /// A live session of this request's cookie.
    struct Session: Sendable {
        /// The cookie's value.
        var id: String
        var tokenHash: [UInt8]
        var csrf: String
    }

    /// A form's answer, given back to the GET its redirect makes.
    struct HeldPage: Sendable {
        var status: HTTPResponse.Status
        var html: String
    }

    /// How long a held page waits for its GET (a redirect is followed at once).
    static let heldLifetime: TimeInterval = 60
    /// A session's last request is recorded at most this often: the idle end is this much late at most, and a page
    /// load is a read, not a write.
    static let touchInterval: TimeInterval = 60

    let store: any ConsoleSessionStore
    /// The most a session lives, and the most it may sit unused.
    var lifetime = ConsoleSessionLimits.lifetime
    var idle = ConsoleSessionLimits.idle

    /// A new session for the token whose hash is `tokenHash`: its cookie value and CSRF token.
    func create(tokenHash: [UInt8], now: Date) async throws -> Session {
        let id = Base64URL.encode(Hashing.randomBytes(count: 32))
        try await store.createConsoleSession(
            ConsoleSessionRecord(
                idHash: Self.hash(id),
                tokenHash: tokenHash,
                createdAt: now,
                lastSeenAt: now,
                expiresAt: now.addingTimeInterval(lifetime)
            )
        )
        return Session(id: id, tokenHash: tokenHash, csrf: Self.csrf(id))
    }

    /// The live session of cookie value `id`, its last request recorded when the one recorded is a minute old; nil
    /// when unknown or ended.
    func session(id: String, now: Date) async throws -> Session? {
        guard id.utf8.count <= 64 else { return nil }
        let idHash = Self.hash(id)
        guard let record = try await store.consoleSession(idHash: idHash, now: now, idle: idle) else { return nil }
        if now.timeIntervalSince(record.lastSeenAt) >= Self.touchInterval {
            try await store.touchConsoleSession(idHash: idHash, at: now)
        }
        return Session(id: id, tokenHash: record.tokenHash, csrf: Self.csrf(id))
    }

    /// Holds `html` for one GET by the session of cookie value `id`; the result id to redirect to.
    func hold(_ status: HTTPResponse.Status, _ html: String, sessionID id: String, now: Date) async throws -> String {
        let resultID = Base64URL.encode(Hashing.randomBytes(count: 16))
        try await store.holdConsolePage(
            HeldConsolePage(
                status: status.code,
                sealed: TicketSeal.seal(Array(html.utf8), ticket: Self.heldKey(sessionID: id, resultID: resultID))
            ),
            resultHash: Self.hash(resultID),
            sessionHash: Self.hash(id),
            expiresAt: now.addingTimeInterval(Self.heldLifetime)
        )
        return resultID
    }

    /// The page held under `resultID` for the session of cookie value `id`, removed as it is given (single use); nil
    /// when unknown, already shown, expired, or another session's.
    func take(_ resultID: String, sessionID id: String, now: Date) async throws -> HeldPage? {
        guard id.utf8.count <= 64, resultID.utf8.count <= 64,
            let held = try await store.takeConsolePage(
                resultHash: Self.hash(resultID),
                sessionHash: Self.hash(id),
                now: now
            ),
            let html = TicketSeal.open(held.sealed, ticket: Self.heldKey(sessionID: id, resultID: resultID))
        else { return nil }
        return HeldPage(status: HTTPResponse.Status(code: held.status), html: String(decoding: html, as: UTF8.self))
    }

    func end(id: String) async throws {
        try await store.endConsoleSession(idHash: Self.hash(id))
    }

    /// What the store keeps of a cookie's value or a result id.
    static func hash(_ value: String) -> [UInt8] { Hashing.blake2b256(Array(value.utf8)) }

    /// The session's CSRF token: an HMAC under the cookie's value, so nothing stored gives it.
    static func csrf(_ id: String) -> String {
        Base64URL.encode(Hashing.hmacSHA256(key: Array(id.utf8), message: Array("profile-escrow console csrf v1".utf8)))
    }

    /// The key material a held page is sealed under: an HMAC under the cookie's value, bound to the result id.
    private static func heldKey(sessionID id: String, resultID: String) -> [UInt8] {
        Hashing.hmacSHA256(key: Array(id.utf8), message: Array("profile-escrow console held page v1 \(resultID)".utf8))
    }
}
