import Foundation

/// Why an operator requeued or erased an escrow, as the audit trail keeps it: 1-200 characters, no control
/// characters, spaces trimmed. A free text an operator types: the docs ask for a ticket number or a cause, never a
/// name or an email, and the text is never shown outside the operator's own tools.
public struct OperatorReason: Sendable, Hashable, CustomStringConvertible {
    public static let maximumLength = 200

    public let text: String
    public var description: String { text }

    /// Nil when `text` is empty once trimmed, longer than ``maximumLength`` characters, or holds a control
    /// character (a line break, a tab, an escape, a bidi override).
    public init?(_ text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.count <= Self.maximumLength, trimmed.utf8.count <= 4 * Self.maximumLength
        else { return nil }
        for scalar in trimmed.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse, .unassigned:
                return nil
            default: continue
            }
        }
        self.text = trimmed
    }

    /// What a refusal says (no echo of the text).
    public static let rule = "reason must be 1-\(maximumLength) characters without control characters"
}

extension LifecycleAction {
    /// The same change with `reason` on each of its audit events (an operator's requeue or erasure).
    public func withReason(_ reason: OperatorReason?) -> LifecycleAction {
        guard let reason else { return self }
        switch change {
        case .update(let record, let drafts):
            return LifecycleAction(.update(record, drafts.map { $0.withReason(reason) }))
        case .purge(let why, let drafts):
            return LifecycleAction(.purge(why, drafts.map { $0.withReason(reason) }))
        case .ignore:
            return self
        }
    }
}

extension AuditDraft {
    func withReason(_ reason: OperatorReason) -> AuditDraft {
        var draft = self
        draft.reason = reason.text
        return draft
    }
}
