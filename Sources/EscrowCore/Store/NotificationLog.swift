public import Foundation

/// Which Apple server-to-server notifications were already handled, by a hash of their `jti`.
///
/// A notification is recorded only after it was applied: a crash in between leaves it unrecorded,
/// and Apple's retry applies it again (every notification's effect is idempotent). Recording first
/// would lose a `consent-revoked` purge to such a crash.
public protocol NotificationLog: Sendable {
    /// Whether a notification id was already handled.
    func hasNotification(idHash: [UInt8]) async throws -> Bool

    /// Records a handled notification id; returns false when it was already recorded.
    func recordNotification(idHash: [UInt8], at now: Date) async throws -> Bool
}
