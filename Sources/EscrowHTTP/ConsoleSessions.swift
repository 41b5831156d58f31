import EscrowCore
import EscrowCrypto
import Foundation
import NIOConcurrencyHelpers

/// The console's server-side sessions, in this process's memory: a random id in a `__Host-` cookie, kept here only as
/// its hash, with the token's hash (each request checks the token again, so a revoked token ends its sessions), a
/// CSRF token, an absolute and an idle expiry. A restart signs everyone out; sessions are not shared between nodes.
final class ConsoleSessions: Sendable {
    struct Session: Sendable {
        var tokenHash: [UInt8]
        var csrf: String
        var createdAt: Date
        var lastSeen: Date
    }

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

    func end(id: String) {
        let key = Hashing.blake2b256(Array(id.utf8))
        _ = sessions.withLockedValue { $0.removeValue(forKey: key) }
    }

    private func isLive(_ session: Session, now: Date) -> Bool {
        now.timeIntervalSince(session.createdAt) < lifetime && now.timeIntervalSince(session.lastSeen) < idle
    }
}
