/// What a bearer token of the HTTP API may do.
public enum AccessTokenScope: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
    case capture, read, replay, confirm, erase, metrics
    /// Redeems web sign-in tickets (`POST /v1/apple/signin/tickets/redeem`): an app backend's, server to server.
    case signin

    public static func < (lhs: Self, rhs: Self) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}
