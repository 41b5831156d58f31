import Foundation

/// Why an operator requeued or erased an escrow, as the audit trail keeps it: 1-200 characters (Unicode scalars, as
/// JSON Schema's `maxLength` counts), at least one that is not white space, no control characters or bidirectional
/// controls; kept with white space trimmed. A free text an operator types: the docs ask for a ticket number or a cause,
/// never a name or an email, and the text is never shown outside the operator's own tools.
public struct OperatorReason: Sendable, Hashable, CustomStringConvertible {
    public static let maximumLength = 200

    public let text: String
    public var description: String { text }

    /// Nil when `text` is longer than ``maximumLength`` scalars, only white space, or holds a control character (a
    /// line break, a tab, an escape) or a bidirectional control.
    public init?(_ text: String) {
        let scalars = text.unicodeScalars
        guard scalars.count <= Self.maximumLength else { return nil }
        for scalar in scalars where Self.refused(scalar) { return nil }
        let kept = scalars.drop(while: Self.isSpace).reversed().drop(while: Self.isSpace).reversed()
        guard !kept.isEmpty else { return nil }
        var trimmed = String.UnicodeScalarView()
        trimmed.append(contentsOf: kept)
        self.text = String(trimmed)
    }

    /// The characters the profile's rules refuse in a name: C0, DEL, C1, the line and paragraph separators, and the
    /// bidirectional controls (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C).
    static func refused(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069, 0x200E, 0x200F, 0x061C: true
        default: false
        }
    }

    /// White space as a JSON Schema (ECMAScript) `\s` matches it.
    static func isSpace(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x09...0x0D, 0x20, 0xA0, 0x1680, 0x2000...0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF: true
        default: false
        }
    }

    /// What a refusal says (no echo of the text).
    public static let rule =
        "reason must be 1-\(maximumLength) characters, not only spaces, without control characters"
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
