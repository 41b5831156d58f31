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

    /// Inserts a row. With `ifNoLiveEscrow`, a row whose blind index is already live is not inserted
    /// (`ON CONFLICT DO NOTHING`) and the result is false.
    @discardableResult
    static func insert(_ record: EscrowRecord, _ db: Database, ifNoLiveEscrow: Bool = false) throws -> Bool {
        try db.cachedStatement(
            sql: """
                INSERT INTO escrow (id, blind_index, key_version, public_key, sealed_profile, sealed_key, mac,
                    content_tag, state, revision, attempts, next_attempt_at, lease_owner, lease_expires_at,
                    confirm_deadline, due_at, created_at, expires_at, updated_at, dead_code, last_status)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                \(ifNoLiveEscrow ? "ON CONFLICT (blind_index) DO NOTHING" : "")
                """
        ).execute(
            arguments: [
                Data(record.sealed.id.bytes), Data(record.sealed.blindIndex.bytes), Int64(record.sealed.keyVersion),
                Data(record.sealed.publicKey), Data(record.sealed.sealedProfile), Data(record.sealed.sealedKey),
                Data(record.sealed.mac), Data(record.contentTag), record.state.rawValue, record.revision,
                record.attempts, ms(record.nextAttemptAt), record.leaseOwner, ms(record.leaseExpiresAt),
                ms(record.confirmDeadline), ms(record.dueAt), ms(record.createdAt), ms(record.expiresAt),
                ms(record.updatedAt), record.deadCode?.rawValue, record.lastStatus,
            ]
        )
        return db.changesCount == 1
    }

    /// Rewrites a record in place if it is still at `expectedRevision`; returns whether it was.
    static func update(_ record: EscrowRecord, expectedRevision: Int64, _ db: Database) throws -> Bool {
        try db.cachedStatement(
            sql: """
                UPDATE escrow SET key_version = ?, public_key = ?, sealed_profile = ?, sealed_key = ?, mac = ?,
                    content_tag = ?, state = ?, revision = ?, attempts = ?, next_attempt_at = ?, lease_owner = ?,
                    lease_expires_at = ?, confirm_deadline = ?, due_at = ?, expires_at = ?, updated_at = ?,
                    dead_code = ?, last_status = ?
                WHERE id = ? AND revision = ?
                """
        ).execute(
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
        var appender = try AuditAppender(db)
        try appender.append(drafts, db)
        try appender.finish(db)
    }

    /// The columns of an audit event, in the order ``event(from:)`` reads them by position (a lookup
    /// by name costs more than the rest of the mapping on a million-event report).
    static let auditColumns = "seq, at, type, escrow_id, index_prefix, detail, http_status, actor, age_ms, hash"

    static func event(from row: Row) -> AuditEvent {
        let draft = AuditDraft(
            type: AuditEventType(rawValue: row[2] ?? ""),
            at: date(row[1] as Int64),
            escrowID: row[3],
            indexPrefix: row[4],
            detail: row[5],
            httpStatus: row[6],
            actor: AuditActor(rawValue: row[7] ?? ""),
            ageMilliseconds: row[8]
        )
        return AuditEvent(sequence: row[0], draft: draft, hash: [UInt8]((row[9] as Data?) ?? Data()))
    }

}
