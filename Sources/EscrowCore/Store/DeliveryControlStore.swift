public import Foundation

/// The cluster's delivery switch as the store keeps it: whether the replay workers of every node may claim, and who
/// changed that last, when and why.
public struct DeliveryControl: Sendable, Equatable {
    public var paused: Bool
    /// When the last pause or resume was committed; nil when deliveries were never paused.
    public var changedAt: Date?
    public var changedBy: AuditActor?
    /// The operator's reason for the last pause or resume.
    public var reason: String?

    /// Deliveries run, and were never paused.
    public static let running = DeliveryControl(paused: false)

    public init(paused: Bool, changedAt: Date? = nil, changedBy: AuditActor? = nil, reason: String? = nil) {
        self.paused = paused
        self.changedAt = changedAt
        self.changedBy = changedBy
        self.reason = reason
    }
}

/// Pausing and resuming deliveries for every node at once. The state is one row of the store, so every worker sharing
/// the store sees a change at its next claim; a change and its audit event commit in one transaction.
public protocol DeliveryControlStore: Sendable {
    /// The switch as committed; ``DeliveryControl/running`` when it was never changed. One primary-key read: the
    /// replay worker reads it before each claim.
    func deliveryControl() async throws -> DeliveryControl

    /// Pauses (`paused` true) or resumes deliveries, recording `audit`'s time, actor and reason as the switch's, and
    /// appending `audit` in the same transaction. False, with nothing recorded or appended, when deliveries already
    /// were in that state (also when another node changed it meanwhile).
    func setDeliveriesPaused(_ paused: Bool, audit: AuditDraft) async throws -> Bool

    /// How many escrows the store holds that expire before `date` (a range of the expiry index): what retention will
    /// purge meanwhile, delivered or not.
    func escrowCount(expiringBefore date: Date) async throws -> Int
}
