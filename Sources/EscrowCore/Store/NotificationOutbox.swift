public import Foundation

/// One Apple notification waiting in the outbox to be forwarded to the backend: its body sealed to a master key
/// version (it holds Apple's signed payload: a user identifier, maybe an email), never in clear.
public struct OutboxEntry: Sendable, Equatable {
    /// The webhook id (`apple-<hex>`, a hash of the notification's `jti`): the row's key, stable across retries.
    public var webhookID: String
    /// The master key version the body is sealed to.
    public var keyVersion: UInt32
    public var sealedBody: [UInt8]
    /// Attempts so far: a claim counts one.
    public var attempts: Int
    /// When the entry is next due; while it is claimed, the end of the claim's lease.
    public var nextAttemptAt: Date
    public var createdAt: Date

    public init(
        webhookID: String,
        keyVersion: UInt32,
        sealedBody: [UInt8],
        attempts: Int = 0,
        nextAttemptAt: Date,
        createdAt: Date
    ) {
        self.webhookID = webhookID
        self.keyVersion = keyVersion
        self.sealedBody = sealedBody
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.createdAt = createdAt
    }
}

extension OutboxEntry {
    /// How long an entry is kept at most (seconds), sent or not: a day, far past the retry window of the default
    /// attempts and backoff (about 20 minutes), so that it also covers a time with no forwarder running. The
    /// forwarder's sweep and the retention sweep (``EscrowStore``'s users: the worker, `sweep`) delete it after.
    public static let retention: Double = 86_400
}

/// What recording a handled notification did.
public enum NotificationRecording: Sendable, Equatable {
    /// It was recorded before: nothing changed.
    case duplicate
    /// Recorded; nothing to forward.
    case recorded
    /// Recorded, and its forwarded copy queued (or already queued under its webhook id).
    case queued
    /// Recorded, but the outbox is full: its forwarded copy is not queued.
    case full
}

/// The durable outbox of forwarded Apple notifications, beside the ``NotificationLog``: a notification is recorded
/// as handled and queued for forwarding in one transaction, so a crash never records one without queueing it.
/// Several forwarders may share one store: a claim leases its entries (they are not due again before the lease
/// ends), so two never send the same entry within a lease.
///
/// The `EscrowStoreConformance` module holds the checks every implementation must pass.
public protocol NotificationOutbox: NotificationLog {
    /// In one transaction: records the notification id as handled and, when it was not recorded before, queues
    /// `forward` (one entry for each URL it goes to; none: nothing to forward) unless the outbox already holds
    /// `capacity` entries. Queueing is idempotent on each entry's webhook id.
    func recordNotification(
        idHash: [UInt8],
        at now: Date,
        forward: [OutboxEntry],
        capacity: Int
    ) async throws -> NotificationRecording

    /// Up to `limit` entries due at `now`, the longest due first, each claimed: its attempts counted (the returned
    /// entries carry the new count) and not due again before `now + lease` seconds.
    func claimOutbox(at now: Date, limit: Int, lease: Double) async throws -> [OutboxEntry]

    /// Sets when a claimed entry is due again, when no later claim took it (its attempts are still `attempts`);
    /// returns whether it did.
    func rescheduleOutbox(webhookID: String, attempts: Int, at next: Date) async throws -> Bool

    /// Deletes an entry: forwarded, refused or given up. Returns whether it was there.
    func deleteOutbox(webhookID: String) async throws -> Bool

    /// Deletes every entry created before `cutoff`; returns their webhook ids.
    func sweepOutbox(createdBefore cutoff: Date) async throws -> [String]

    /// How many entries wait, claimed or not.
    func outboxCount() async throws -> Int
}

extension NotificationOutbox {
    /// The log's record: nothing to forward. Shared by every outbox, and correct for each: a record with no entry to
    /// queue is what ``recordNotification(idHash:at:forward:capacity:)`` does with `forward` empty.
    public func recordNotification(idHash: [UInt8], at now: Date) async throws -> Bool {
        try await recordNotification(idHash: idHash, at: now, forward: [], capacity: 0) == .recorded
    }
}
