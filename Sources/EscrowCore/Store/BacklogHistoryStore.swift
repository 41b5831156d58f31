public import Foundation

/// The backlog at one time, as the overview charts it: pending and dead escrows, and the oldest pending age.
public struct BacklogSample: Sendable, Equatable {
    public var at: Date
    public var pending: Int
    public var dead: Int
    public var oldestPendingAgeSeconds: Int?

    public init(at: Date, pending: Int, dead: Int, oldestPendingAgeSeconds: Int?) {
        self.at = at
        self.pending = pending
        self.dead = dead
        self.oldestPendingAgeSeconds = oldestPendingAgeSeconds
    }
}

/// The overview's backlog history, kept in the store so that it survives a restart and every node charts the same
/// one. Whichever node samples writes; one sample a slot is kept, so the table's size is bounded by the window
/// whatever the number of nodes.
public protocol BacklogHistoryStore: Sendable {
    /// Records `sample` as the one of its slot (`slotSeconds` long, counted from 1970), unless the slot holds a newer
    /// one (another node's), and deletes the samples older than `window` before it.
    func recordBacklogSample(_ sample: BacklogSample, slotSeconds: Int, window: TimeInterval) async throws

    /// The samples taken at `since` or later, oldest first.
    func backlogSamples(since: Date) async throws -> [BacklogSample]
}
