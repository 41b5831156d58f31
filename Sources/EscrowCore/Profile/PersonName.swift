/// The name components Apple hands over on the first authorization (`PersonNameComponents`).
///
/// A plain value: validation and NFC normalization happen in
/// ``Profile/init(userIdentifier:fullName:email:isPrivateEmail:realUserStatus:)``. It never shows its
/// contents in `description`, `debugDescription`, `dump` or a `Mirror`.
public struct PersonName: Sendable, Equatable, Codable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    public var givenName: String?
    public var familyName: String?
    public var middleName: String?
    public var namePrefix: String?
    public var nameSuffix: String?
    public var nickname: String?

    public init(
        givenName: String? = nil,
        familyName: String? = nil,
        middleName: String? = nil,
        namePrefix: String? = nil,
        nameSuffix: String? = nil,
        nickname: String? = nil
    ) {
        self.givenName = givenName
        self.familyName = familyName
        self.middleName = middleName
        self.namePrefix = namePrefix
        self.nameSuffix = nameSuffix
        self.nickname = nickname
    }

    /// Whether every component is absent.
    public var isEmpty: Bool {
        givenName == nil && familyName == nil && middleName == nil && namePrefix == nil && nameSuffix == nil
            && nickname == nil
    }

    public var description: String { "PersonName(redacted)" }
    public var debugDescription: String { "PersonName(redacted)" }
    public var customMirror: Mirror { Mirror(self, children: EmptyCollection<Mirror.Child>()) }
}

extension PersonName {
    /// The JSON member names, in the order of the wire formats.
    static let keys = ["givenName", "familyName", "middleName", "namePrefix", "nameSuffix", "nickname"]

    /// The components in the order of ``keys``.
    var components: [String?] { [givenName, familyName, middleName, namePrefix, nameSuffix, nickname] }

    /// Builds a name from components in the order of ``keys``.
    init(components: [String?]) {
        precondition(components.count == Self.keys.count)
        self.init(
            givenName: components[0],
            familyName: components[1],
            middleName: components[2],
            namePrefix: components[3],
            nameSuffix: components[4],
            nickname: components[5]
        )
    }
}
