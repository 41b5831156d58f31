/// Who caused an audit event: `library`, `cli`, `apple`, `http:<token name>`, `console:<token name>`, `worker:<id>`.
public struct AuditActor: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    public static let library = AuditActor(rawValue: "library")
    public static let cli = AuditActor(rawValue: "cli")
    public static let apple = AuditActor(rawValue: "apple")
    public static func http(token name: String) -> AuditActor { AuditActor(rawValue: "http:\(name)") }
    /// A person in the operator console, signed in with this token.
    public static func console(token name: String) -> AuditActor { AuditActor(rawValue: "console:\(name)") }
    public static func worker(_ id: String) -> AuditActor { AuditActor(rawValue: "worker:\(id)") }
}
