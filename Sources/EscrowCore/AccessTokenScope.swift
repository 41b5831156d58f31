/// What a bearer token of the HTTP API may do.
public enum AccessTokenScope: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
    case capture, read, replay, confirm, erase, metrics

    public static func < (lhs: Self, rhs: Self) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}
