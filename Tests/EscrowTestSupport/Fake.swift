public import EscrowCore
import Foundation

/// Obviously fake profiles whose every personal field carries a scannable canary token.
public enum Fake {
    /// The canary tokens: none may ever be logged, stored in the clear or printed.
    public static let tokens = ["CANARYGIVEN", "CANARYFAMILY", "canarymail", "canaryuid"]

    public static func userIdentifier(_ number: Int) -> String {
        "000000.canaryuid\(String(format: "%023d", number)).0001"
    }

    public static func email(_ number: Int) -> String { "canarymail\(number)@example.invalid" }

    public static func profile(_ number: Int, email: String? = nil) throws -> Profile {
        try Profile(
            userIdentifier: userIdentifier(number),
            fullName: PersonName(givenName: "CANARYGIVEN\(number)", familyName: "CANARYFAMILY\(number)"),
            email: email ?? self.email(number),
            realUserStatus: .likelyReal
        )
    }

    /// The profile as a registration service posts it (JSON object).
    public static func profileObject(_ number: Int, given: String? = nil, email: String? = nil) -> [String: Any] {
        [
            "userIdentifier": userIdentifier(number),
            "fullName": ["givenName": given ?? "CANARYGIVEN\(number)", "familyName": "CANARYFAMILY\(number)"],
            "email": email ?? self.email(number),
            "realUserStatus": "likelyReal",
        ]
    }
}
