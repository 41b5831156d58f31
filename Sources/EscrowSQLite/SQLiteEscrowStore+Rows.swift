package import EscrowCore
import EscrowCrypto
import Foundation
package import GRDB

extension SQLiteEscrowStore {
    static func ms(_ date: Date) -> Int64 { Timestamp.unixMilliseconds(date) }
    static func ms(_ date: Date?) -> Int64? { date.map(Timestamp.unixMilliseconds) }
    static func date(_ ms: Int64?) -> Date? { ms.map { Timestamp.date(unixMilliseconds: $0) } }

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
            // By position: GRDB finds a column by name with a case-insensitive scan that lowercases every name it
            // passes (about 230 lowercased strings per row of 21 columns, measured at 1–2% of replay's CPU).
            guard let position = SQLiteEscrowStore.escrowColumnPositions[column] else { throw MalformedColumn(column) }
            let stored = row[position] as DatabaseValue
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

    /// A selected row as the store engine sees it: a record, or a malformed row to quarantine.
    static func stored(from row: Row) -> StoredEscrow {
        do throws(MalformedRow) {
            return .record(try record(from: row))
        } catch {
            return .malformed(error)
        }
    }

    /// The columns ``record(from:)`` reads: SQLite's rowid, then each of ``EscrowColumn`` in its order.
    static let escrowColumns = (["rowid"] + EscrowColumn.allCases.map(\.rawValue)).joined(separator: ", ")

    /// Where each column of ``escrowColumns`` is in a selected row.
    static let escrowColumnPositions: [String: Int] = Dictionary(
        uniqueKeysWithValues: EscrowColumn.allCases.enumerated().map { ($0.element.rawValue, $0.offset + 1) }
    )

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
                db.cachedStatement(
                    sql: "SELECT id, blind_index, revision, state, dead_code FROM escrow WHERE rowid = ?"
                ),
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

    /// The columns of an audit event, in the order ``event(from:)`` reads them by position (a lookup
    /// by name costs more than the rest of the mapping on a million-event report).
    static let auditColumns = AuditEvent.storedColumns.joined(separator: ", ")

    static func event(from row: Row) -> AuditEvent {
        let draft = AuditDraft(
            type: AuditEventType(rawValue: row[2] ?? ""),
            at: Timestamp.date(unixMilliseconds: row[1]),
            escrowID: row[3],
            indexPrefix: row[4],
            detail: row[5],
            httpStatus: row[6],
            actor: AuditActor(rawValue: row[7] ?? ""),
            ageMilliseconds: row[8],
            reason: row[11]
        )
        // An encoding this version does not know verifies as v1, and so fails verification: it was not written here.
        return AuditEvent(
            sequence: row[0],
            draft: draft,
            hash: [UInt8]((row[9] as Data?) ?? Data()),
            encoding: (row[10] as Int?).flatMap(AuditEncoding.init(rawValue:)) ?? .v1
        )
    }

}
