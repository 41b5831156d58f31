package import EscrowCore
import EscrowCrypto
import Foundation
package import GRDB

extension SQLiteEscrowStore {
    static func ms(_ date: Date) -> Int64 { Timestamp.unixMilliseconds(date) }
    static func ms(_ date: Date?) -> Int64? { date.map(Timestamp.unixMilliseconds) }
    static func date(_ ms: Int64?) -> Date? { ms.map { Timestamp.date(unixMilliseconds: $0) } }

    /// A stored row that does not decode into a valid record: a wrong length, a value out of range, a
    /// missing or unknown value, a state without what it needs. Such a row is quarantined, never a crash.
    package struct MalformedRow: Error {
        /// SQLite's rowid, to address the row whatever its id column holds.
        let rowID: Int64
        let column: String
    }

    /// Decodes a row of `escrow` selected with `rowid` first (``escrowColumns``), by the rules every store shares
    /// (``EscrowRecord/decode(_:)``). Every column is read as an optional of its type, so no stored value can trap
    /// (GRDB's non-optional subscripts crash on a NULL or a value out of range).
    package static func record(from row: Row) throws(MalformedRow) -> EscrowRecord {
        do {
            return try EscrowRecord.decode(StoredRow(row: row))
        } catch {
            throw MalformedRow(rowID: Int64.fromDatabaseValue(row[0] as DatabaseValue) ?? 0, column: error.column)
        }
    }

    /// A GRDB row's columns: NULL is nil, a value of another type (or out of its type's range) is malformed.
    private struct StoredRow: StoredEscrowRow {
        let row: Row

        func value<T: DatabaseValueConvertible>(_ column: String, as type: T.Type) throws(MalformedColumn) -> T? {
            let stored = row[column] as DatabaseValue
            if stored.isNull { return nil }
            guard let value = T.fromDatabaseValue(stored) else { throw MalformedColumn(column) }
            return value
        }

        func bytes(_ column: String) throws(MalformedColumn) -> [UInt8]? {
            try value(column, as: Data.self).map { [UInt8]($0) }
        }
        func integer(_ column: String) throws(MalformedColumn) -> Int64? { try value(column, as: Int64.self) }
        func text(_ column: String) throws(MalformedColumn) -> String? { try value(column, as: String.self) }
    }

    /// The columns ``record(from:)`` reads: SQLite's rowid first.
    static let escrowColumns = "rowid, *"

    /// The record matching `condition`, or nil. A malformed row throws ``MalformedRow``.
    static func fetchRecord(
        _ db: Database,
        where condition: String,
        _ arguments: StatementArguments
    ) throws
        -> EscrowRecord?
    {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT \(escrowColumns) FROM escrow WHERE \(condition)"),
            arguments: arguments
        ).map { row throws in try record(from: row) }
    }

    /// What is known of a malformed row, addressed by rowid (its id column may be what is broken); nil when it is
    /// gone.
    static func malformed(_ rowID: Int64, column: String, _ db: Database) throws -> MalformedEscrowRow? {
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT id, blind_index, revision, state, dead_code FROM escrow WHERE rowid = ?"),
                arguments: [rowID]
            )
        else { return nil }
        return MalformedEscrowRow(
            rowID: rowID,
            column: column,
            idBytes: Data.fromDatabaseValue(row[0] as DatabaseValue).map { [UInt8]($0) },
            blindIndexBytes: Data.fromDatabaseValue(row[1] as DatabaseValue).map { [UInt8]($0) },
            storedRevision: Int64.fromDatabaseValue(row[2] as DatabaseValue),
            isQuarantined: String.fromDatabaseValue(row[3] as DatabaseValue) == EscrowState.dead.rawValue
                && String.fromDatabaseValue(row[4] as DatabaseValue) == DeadCode.ciphertextInvalid.rawValue
        )
    }

    /// Applies what the lifecycle decided for a malformed row inside the caller's transaction, with its events;
    /// returns whether the row was there.
    static func apply(
        _ action: MalformedRowAction,
        rowID: Int64,
        _ db: Database,
        _ audit: inout AuditAppender
    ) throws -> Bool {
        switch action.change {
        case .quarantine(let revision, let updatedAt, _):
            try db.cachedStatement(
                sql: """
                    UPDATE escrow SET state = ?, dead_code = ?, lease_owner = NULL, lease_expires_at = NULL,
                        confirm_deadline = NULL, due_at = NULL, revision = ?, updated_at = ?
                    WHERE rowid = ?
                    """
            ).execute(arguments: [
                EscrowState.dead.rawValue, DeadCode.ciphertextInvalid.rawValue, revision, ms(updatedAt), rowID,
            ])
        case .delete:
            try db.cachedStatement(sql: "DELETE FROM escrow WHERE rowid = ?").execute(arguments: [rowID])
        }
        guard db.changesCount == 1 else { return false }
        try audit.append(action.auditDrafts, db)
        return true
    }

    /// Reads what is known of the malformed row `error` names and applies the lifecycle's action for `event` to
    /// it, inside the caller's transaction; returns whether the row was there.
    static func handle(
        _ event: MalformedRowEvent,
        on error: MalformedRow,
        lifecycle: EscrowLifecycle,
        at now: Date,
        actor: AuditActor,
        _ db: Database,
        _ audit: inout AuditAppender
    ) throws -> Bool {
        guard let row = try malformed(error.rowID, column: error.column, db) else { return false }
        return try apply(lifecycle.handle(event, on: row, at: now, actor: actor), rowID: row.rowID, db, &audit)
    }

    /// Refuses a row sealed to a retired master key version: nobody holds its secret key any more.
    static func requireUsable(_ version: UInt32, _ db: Database) throws {
        let retired = try Row.fetchOne(
            db.cachedStatement(sql: "SELECT 1 FROM retired_key_version WHERE version = ?"),
            arguments: [Int64(version)]
        )
        guard retired == nil else {
            throw EscrowStoreError(
                .keyVersionRetired,
                "master key version \(version) is retired: nothing may be sealed to it (the writing node's keyring "
                    + "is out of date; reload it)"
            )
        }
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
            at: Timestamp.date(unixMilliseconds: row[1]),
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
