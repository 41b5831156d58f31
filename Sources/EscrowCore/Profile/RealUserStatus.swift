/// Apple's assessment of whether the user is a real person (`ASUserDetectionStatus`).
public enum RealUserStatus: String, Sendable, Codable, CaseIterable {
    case unsupported
    case unknown
    case likelyReal
}
