/// The kinds of audit events (normative names). A struct, not an enum, so that a stored
/// event with a type this version does not know still reads back (and fails chain verification
/// if it was tampered with) instead of failing to decode.
public struct AuditEventType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    public static let captured = AuditEventType(rawValue: "captured")
    public static let replaced = AuditEventType(rawValue: "replaced")
    public static let deliveryAttempted = AuditEventType(rawValue: "delivery-attempted")
    public static let awaitingConfirmation = AuditEventType(rawValue: "awaiting-confirmation")
    public static let confirmed = AuditEventType(rawValue: "confirmed")
    public static let purged = AuditEventType(rawValue: "purged")
    public static let dead = AuditEventType(rawValue: "dead")
    public static let requeued = AuditEventType(rawValue: "requeued")
    /// The sealed profile was changed in place (an Apple email-disabled/enabled notification).
    public static let updated = AuditEventType(rawValue: "updated")
    public static let keysRotated = AuditEventType(rawValue: "keys-rotated")
    public static let keysRewrapped = AuditEventType(rawValue: "keys-rewrapped")
    public static let keysRetired = AuditEventType(rawValue: "keys-retired")
    /// The keyring's master secret keys moved into, out of or within custody (an external engine that wraps them).
    public static let keysCustodyChanged = AuditEventType(rawValue: "keys-custody-changed")
    /// An operator paused deliveries for every node (the actor and reason with it); captures and retention go on.
    public static let deliveriesPaused = AuditEventType(rawValue: "deliveries-paused")
    /// An operator resumed deliveries for every node (the actor and reason with it).
    public static let deliveriesResumed = AuditEventType(rawValue: "deliveries-resumed")
    /// A web sign-in's callback escrowed the profile (after its `captured`, in the same transaction): the escrow id,
    /// never the state, code or ticket. Written by earlier versions only: a web sign-in's capture is now one
    /// `captured` event whose detail is `web-signin`. Still read, and verified, in existing chains.
    public static let signinCaptured = AuditEventType(rawValue: "signin-captured")
    /// Apple answered `200` to a revocation (its id in the detail, never the token).
    public static let appleTokenRevoked = AuditEventType(rawValue: "apple-token-revoked")
    /// A revocation was given up after its last attempt (its id and Apple's last error code in the detail).
    public static let appleRevocationFailed = AuditEventType(rawValue: "apple-revocation-failed")
}
