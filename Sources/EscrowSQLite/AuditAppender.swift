import EscrowCore
import Foundation
import GRDB

/// Appends audit events inside one transaction: reads the chain head once, hashes and inserts each
/// event, and writes the head back once at the end (a batch of captures costs one head read and one
/// head write, not one of each per capture).
struct AuditAppender {
    private(set) var head: AuditHead
    private var changed = false

    init(_ db: Database) throws {
        head =
            try Row.fetchOne(db.cachedStatement(sql: "SELECT seq, hash FROM audit_head WHERE singleton = 1"))
            .map { AuditHead(sequence: $0[0], hash: [UInt8]($0[1] as Data)) }
            ?? AuditHead(sequence: 0, hash: AuditChain.genesis)
    }

    mutating func append(_ drafts: [AuditDraft], _ db: Database) throws {
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO audit_event (seq, at, type, escrow_id, index_prefix, detail, http_status, actor,
                    age_ms, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        )
        for draft in drafts {
            let sequence = head.sequence + 1
            let hash = AuditChain.hash(previous: head.hash, sequence: sequence, draft: draft)
            try insert.execute(arguments: [
                sequence, Timestamp.unixMilliseconds(draft.at), draft.type.rawValue, draft.escrowID, draft.indexPrefix,
                draft.detail, draft.httpStatus, draft.actor.rawValue, draft.ageMilliseconds, Data(hash),
            ])
            head = AuditHead(sequence: sequence, hash: hash)
            changed = true
        }
    }

    /// Records the new head; must run in the same transaction as the appends.
    func finish(_ db: Database) throws {
        guard changed else { return }
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO audit_head (singleton, seq, hash) VALUES (1, ?, ?)")
            .execute(arguments: [head.sequence, Data(head.hash)])
    }
}
