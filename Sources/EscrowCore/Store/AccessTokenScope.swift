/// What a bearer token of the HTTP API may do.
public enum AccessTokenScope: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
    case capture, read, replay, confirm, erase, metrics
    /// Redeems web sign-in tickets (`POST /v1/apple/signin/tickets/redeem`): an app backend's, server to server.
    case signin
    /// Requeues escrows through the admin API and the console (`/v1/admin/escrows/…/requeue`).
    case operate
    /// Reads the purge report through the admin API and the console (`/v1/admin/purge-report`).
    case audit
    /// Queues and reads revocations of Apple tokens (`/v1/apple/revocations`): an app backend's, at account deletion.
    case revoke

    public static func < (lhs: Self, rhs: Self) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}
