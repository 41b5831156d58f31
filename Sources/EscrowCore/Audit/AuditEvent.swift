/// A stored audit event: a draft plus its sequence number and chain hash.
public struct AuditEvent: Sendable, Equatable {
    public var sequence: Int64
    public var draft: AuditDraft
    /// `BLAKE2b-256(previous hash || canonical event)`, see ``AuditChain``.
    public var hash: [UInt8]
    /// The canonical encoding `hash` was computed over.
    public var encoding: AuditEncoding

    public init(sequence: Int64, draft: AuditDraft, hash: [UInt8], encoding: AuditEncoding = .v1) {
        self.sequence = sequence
        self.draft = draft
        self.hash = hash
        self.encoding = encoding
    }
}
