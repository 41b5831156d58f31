import EscrowCore
import EscrowCrypto
import Foundation
import GRDB

extension SQLiteEscrowStore {
    static func ms(_ date: Date) -> Int64 { AuditChain.milliseconds(date) }
    static func ms(_ date: Date?) -> Int64? { date.map { AuditChain.milliseconds($0) } }
    static func date(_ ms: Int64) -> Date { Date(timeIntervalSince1970: Double(ms) / 1000) }
    static func date(_ ms: Int64?) -> Date? { ms.map { date($0) } }

    static func record(from row: Row) throws -> EscrowRecord {
        let idBytes = [UInt8](row["id"] as Data)
        let indexBytes = [UInt8](row["blind_index"] as Data)
        guard let id = EscrowID(bytes: idBytes), let index = BlindIndex(bytes: indexBytes),
            let state = EscrowState(rawValue: row["state"])
        else {
            throw EscrowStoreError(.failed, "a stored escrow row is malformed")
        }
        let sealed = SealedEscrow(
            id: id,
            blindIndex: index,
            keyVersion: UInt32(row["key_version"] as Int64),
            publicKey: [UInt8](row["public_key"] as Data),
            sealedProfile: [UInt8](row["sealed_profile"] as Data),
            sealedKey: [UInt8](row["sealed_key"] as Data),
            mac: [UInt8](row["mac"] as Data)
        )
        return EscrowRecord(
            sealed: sealed,
            contentTag: [UInt8](row["content_tag"] as Data),
            state: state,
            revision: row["revision"],
            attempts: row["attempts"],
            nextAttemptAt: date(row["next_attempt_at"] as Int64),
            leaseOwner: row["lease_owner"],
            leaseExpiresAt: date(row["lease_expires_at"] as Int64?),
            confirmDeadline: date(row["confirm_deadline"] as Int64?),
            createdAt: date(row["created_at"] as Int64),
            expiresAt: date(row["expires_at"] as Int64),
            updatedAt: date(row["updated_at"] as Int64),
            deadCode: (row["dead_code"] as String?).map(DeadCode.init(rawValue:)),
            lastStatus: row["last_status"]
        )
    }

    static func insert(_ record: EscrowRecord, _ db: Database) throws {
        try db.cachedStatement(sql: """
                INSERT INTO escrow (id, blind_index, key_version, public_key, sealed_profile, sealed_key, mac,
                    content_tag, state, revision, attempts, next_attempt_at, lease_owner, lease_expires_at,
                    confirm_deadline, due_at, created_at, expires_at, updated_at, dead_code, last_status)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """).execute(
            arguments: [
                Data(record.sealed.id.bytes), Data(record.sealed.blindIndex.bytes), Int64(record.sealed.keyVersion),
                Data(record.sealed.publicKey), Data(record.sealed.sealedProfile), Data(record.sealed.sealedKey),
                Data(record.sealed.mac), Data(record.contentTag), record.state.rawValue, record.revision,
                record.attempts, ms(record.nextAttemptAt), record.leaseOwner, ms(record.leaseExpiresAt),
                ms(record.confirmDeadline), ms(record.dueAt), ms(record.createdAt), ms(record.expiresAt),
                ms(record.updatedAt), record.deadCode?.rawValue, record.lastStatus,
            ]
        )
    }

    /// Rewrites a record in place if it is still at `expectedRevision`; returns whether it was.
    static func update(_ record: EscrowRecord, expectedRevision: Int64, _ db: Database) throws -> Bool {
        try db.cachedStatement(sql: """
                UPDATE escrow SET key_version = ?, public_key = ?, sealed_profile = ?, sealed_key = ?, mac = ?,
                    content_tag = ?, state = ?, revision = ?, attempts = ?, next_attempt_at = ?, lease_owner = ?,
                    lease_expires_at = ?, confirm_deadline = ?, due_at = ?, expires_at = ?, updated_at = ?,
                    dead_code = ?, last_status = ?
                WHERE id = ? AND revision = ?
                """).execute(
            arguments: [
                Int64(record.sealed.keyVersion), Data(record.sealed.publicKey), Data(record.sealed.sealedProfile),
                Data(record.sealed.sealedKey), Data(record.sealed.mac), Data(record.contentTag),
                record.state.rawValue, record.revision, record.attempts, ms(record.nextAttemptAt),
                record.leaseOwner, ms(record.leaseExpiresAt), ms(record.confirmDeadline), ms(record.dueAt),
                ms(record.expiresAt), ms(record.updatedAt), record.deadCode?.rawValue, record.lastStatus,
                Data(record.sealed.id.bytes), expectedRevision,
            ]
        )
        return db.changesCount == 1
    }

    /// Appends events to the chain inside the caller's transaction: a failure rolls the change back.
    static func append(_ drafts: [AuditDraft], _ db: Database) throws {
        guard !drafts.isEmpty else { return }
        var head = try Row.fetchOne(try db.cachedStatement(sql: "SELECT seq, hash FROM audit_head WHERE singleton = 1"))
            .map { AuditHead(sequence: $0["seq"], hash: [UInt8]($0["hash"] as Data)) }
            ?? AuditHead(sequence: 0, hash: AuditChain.genesis)
        for draft in drafts {
            let sequence = head.sequence + 1
            let hash = AuditChain.hash(previous: head.hash, sequence: sequence, draft: draft)
            try db.cachedStatement(sql: """
                    INSERT INTO audit_event (seq, at, type, escrow_id, index_prefix, detail, http_status, actor,
                        age_ms, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """).execute(
                arguments: [
                    sequence, ms(draft.at), draft.type.rawValue, draft.escrowID, draft.indexPrefix, draft.detail,
                    draft.httpStatus, draft.actor.rawValue, draft.ageMilliseconds, Data(hash),
                ]
            )
            head = AuditHead(sequence: sequence, hash: hash)
        }
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO audit_head (singleton, seq, hash) VALUES (1, ?, ?)").execute(
            arguments: [head.sequence, Data(head.hash)]
        )
    }

    /// The columns of an audit event, in the order ``event(from:)`` reads them by position (a lookup
    /// by name costs more than the rest of the mapping on a million-event report).
    static let auditColumns = "seq, at, type, escrow_id, index_prefix, detail, http_status, actor, age_ms, hash"

    static func event(from row: Row) -> AuditEvent {
        let draft = AuditDraft(
            type: AuditEventType(rawValue: row[2] ?? ""), at: date(row[1] as Int64), escrowID: row[3],
            indexPrefix: row[4], detail: row[5], httpStatus: row[6], actor: AuditActor(rawValue: row[7] ?? ""),
            ageMilliseconds: row[8]
        )
        return AuditEvent(sequence: row[0], draft: draft, hash: [UInt8]((row[9] as Data?) ?? Data()))
    }

}
