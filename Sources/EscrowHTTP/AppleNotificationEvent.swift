import EscrowCore
import Foundation

/// The `events` claim of an Apple notification, parsed from its JSON string:
/// `{"type": "email-disabled", "sub": "…", "email": "…", "is_private_email": "true", "event_time": …}`.
struct AppleNotificationEvent: Sendable {
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

    init?(json: String) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any],
            let type = object["type"] as? String
        else { return nil }
        kind = Kind(type: type)
        let subject = object["sub"] as? String ?? ""
        // An unknown type is answered 200 and ignored, whatever else it holds.
        guard kind == .unknown || UserIdentifier.isValid(subject) else { return nil }
        self.subject = subject
        email = object["email"] as? String
        switch object["is_private_email"] {
        case let flag as Bool: isPrivateEmail = flag
        case let text as String: isPrivateEmail = text == "true" ? true : text == "false" ? false : nil
        default: isPrivateEmail = nil
        }
    }
}
