import EscrowCore
import Foundation

/// The `events` claim of an Apple notification, parsed from its JSON string:
/// `{"type": "email-disabled", "sub": "…", "email": "…", "is_private_email": "true", "event_time": …}`.
package struct AppleNotificationEvent: Sendable {
    enum Kind: Sendable, Equatable {
        case consentRevoked, accountDeleted, emailEnabled, emailDisabled
        case unknown

        init(type: String) {
            switch type {
            case "consent-revoked": self = .consentRevoked
            case "account-delete", "account-deleted": self = .accountDeleted
            case "email-enabled": self = .emailEnabled
            case "email-disabled": self = .emailDisabled
            default: self = .unknown
            }
        }

        /// For logs: the known names only, never what an unknown type said.
        var name: String {
            switch self {
            case .consentRevoked: "consent-revoked"
            case .accountDeleted: "account-delete"
            case .emailEnabled: "email-enabled"
            case .emailDisabled: "email-disabled"
            case .unknown: "unknown"
            }
        }
    }

    let kind: Kind
    let subject: String
    let email: String?
    let isPrivateEmail: Bool?
    /// When the event happened (`event_time`: Unix time in milliseconds, as Apple sends it; a value below
    /// 10^11 is read as seconds). Nil when absent or not a non-negative integer.
    let eventTime: Date?

    /// Parses the claim with the strict parser: a duplicate `sub` or `type` is refused, not resolved.
    package init?(json: String) {
        guard let object = try? StrictJSON.parse(Array(json.utf8)), let type = object["type"]?.stringValue else {
            return nil
        }
        kind = Kind(type: type)
        let subject = object["sub"]?.stringValue ?? ""
        // An unknown type is answered 200 and ignored, whatever else it holds.
        guard kind == .unknown || UserIdentifier.isValid(subject) else { return nil }
        self.subject = subject
        email = object["email"]?.stringValue
        switch object["is_private_email"] {
        case .bool(let flag): isPrivateEmail = flag
        case .string("true"): isPrivateEmail = true
        case .string("false"): isPrivateEmail = false
        default: isPrivateEmail = nil
        }
        eventTime = Self.time(object["event_time"])
    }

    static func time(_ value: StrictJSON.Value?) -> Date? {
        let text: String
        switch value {
        case .number(let number): text = number
        case .string(let string): text = string
        default: return nil
        }
        guard let integer = Int64(text), integer >= 0 else { return nil }
        let seconds = integer >= 100_000_000_000 ? Double(integer) / 1000 : Double(integer)
        return Date(timeIntervalSince1970: seconds)
    }
}
