import EscrowCore
import EscrowCrypto
import Foundation
import HTTPTypes
import NIOConcurrencyHelpers

/// The console's server-side sessions, in this process's memory: a random id in a `__Host-` cookie, kept here only as
/// its hash, with the token's hash (each request checks the token again, so a revoked token ends its sessions), a
/// CSRF token, an absolute and an idle expiry. A restart signs everyone out; sessions are not shared between nodes.
///
/// A form's answer is held here too (POST, redirect, GET): the POST answers `303` to `/console/result/<id>`, whose GET
/// shows the page once. So the browser's history and session-restore files keep a URL with a random id, never a body
/// holding what was typed (a user identifier, a reason) that a reload or a restored tab would post again.
final class ConsoleSessions: Sendable {
    struct Session: Sendable {
        var tokenHash: [UInt8]
        var csrf: String
        var createdAt: Date
        var lastSeen: Date
        /// Pages held for their one GET, by result id.
        var held: [String: HeldPage] = [:]
    }

    /// A form's answer, waiting for the GET its redirect makes.
    struct HeldPage: Sendable {
        var status: HTTPResponse.Status
        var html: String
        var expiresAt: Date
    }

    /// How long a held page waits for its GET (a redirect is followed at once), and how many a session holds.
    static let heldLifetime: TimeInterval = 60
    static let heldPerSession = 4

    /// The most a session lives, and the most it may sit unused.
    let lifetime: TimeInterval
    let idle: TimeInterval
    /// Past this many, the oldest sessions are dropped (a flood of sign-ins cannot fill memory).
    let capacity: Int
    private let sessions = NIOLockedValueBox<[[UInt8]: Session]>([:])

    init(lifetime: TimeInterval = 8 * 3600, idle: TimeInterval = 30 * 60, capacity: Int = 10_000) {
        self.lifetime = lifetime
        self.idle = idle
        self.capacity = capacity
    }

    /// A new session for the token whose hash is `tokenHash`: its cookie value and CSRF token.
    func create(tokenHash: [UInt8], now: Date) -> (id: String, csrf: String) {
        let id = Base64URL.encode(Hashing.randomBytes(count: 32))
        let csrf = Base64URL.encode(Hashing.randomBytes(count: 32))
        let session = Session(tokenHash: tokenHash, csrf: csrf, createdAt: now, lastSeen: now)
        sessions.withLockedValue { sessions in
            sessions = sessions.filter { isLive($0.value, now: now) }
            if sessions.count >= capacity,
                let oldest = sessions.min(by: { $0.value.lastSeen < $1.value.lastSeen })?.key
            {
                sessions[oldest] = nil
            }
            sessions[Hashing.blake2b256(Array(id.utf8))] = session
        }
        return (id, csrf)
    }

    /// The live session of cookie value `id`, touched; nil when unknown or expired (then forgotten).
    func session(id: String, now: Date) -> Session? {
        guard id.utf8.count <= 64 else { return nil }
        let key = Hashing.blake2b256(Array(id.utf8))
        return sessions.withLockedValue { sessions in
            guard var session = sessions[key] else { return nil }
            guard isLive(session, now: now) else {
                sessions[key] = nil
                return nil
            }
            session.lastSeen = now
            sessions[key] = session
            return session
        }
    }

    /// Holds `html` for one GET in the session of cookie value `id`; the result id to redirect to, or nil when the
    /// session is gone. The oldest held page makes room past ``heldPerSession``.
    func hold(_ status: HTTPResponse.Status, _ html: String, sessionID id: String, now: Date) -> String? {
        let key = Hashing.blake2b256(Array(id.utf8))
        let resultID = Base64URL.encode(Hashing.randomBytes(count: 16))
        let page = HeldPage(status: status, html: html, expiresAt: now.addingTimeInterval(Self.heldLifetime))
        return sessions.withLockedValue { sessions -> String? in
            guard var session = sessions[key], isLive(session, now: now) else { return nil }
            session.held = session.held.filter { $0.value.expiresAt > now }
            while session.held.count >= Self.heldPerSession,
                let oldest = session.held.min(by: { $0.value.expiresAt < $1.value.expiresAt })?.key
            {
                session.held[oldest] = nil
            }
            session.held[resultID] = page
            sessions[key] = session
            return resultID
        }
    }

    /// The page held under `resultID` in the session of cookie value `id`, removed as it is given (single use); nil
    /// when unknown, already shown, expired, or another session's.
    func take(_ resultID: String, sessionID id: String, now: Date) -> HeldPage? {
        guard id.utf8.count <= 64, resultID.utf8.count <= 64 else { return nil }
        let key = Hashing.blake2b256(Array(id.utf8))
        return sessions.withLockedValue { sessions -> HeldPage? in
            guard var session = sessions[key], let page = session.held.removeValue(forKey: resultID) else {
                return nil
            }
            sessions[key] = session
            return page.expiresAt > now ? page : nil
        }
    }

    func end(id: String) {
        let key = Hashing.blake2b256(Array(id.utf8))
        _ = sessions.withLockedValue { $0.removeValue(forKey: key) }
    }

    private func isLive(_ session: Session, now: Date) -> Bool {
        now.timeIntervalSince(session.createdAt) < lifetime && now.timeIntervalSince(session.lastSeen) < idle
    }
}
