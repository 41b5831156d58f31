import EscrowCore
import GRDB
import GRDBSQLite

extension Statement {
    /// Runs this statement (an INSERT or UPDATE: no rows) once with `values`, each bound from its own storage.
    ///
    /// Written by hand for the statements every capture runs (its escrow row, its audit events), where GRDB's
    /// `StatementArguments` cost the writer thread about 5 µs a capture: every value becomes a `DatabaseValue` (each
    /// blob copied into a `Data`) through an unspecialized generic initializer and a key path instantiated at run
    /// time, then the arguments are copied again to be validated and bound. Here each value is bound once
    /// (`SQLITE_TRANSIENT`: SQLite keeps its own copy, as GRDB's bindings do), the statement is stepped, then reset
    /// and its bindings cleared, so no sealed bytes stay bound between runs. A failure throws GRDB's `DatabaseError`
    /// with SQLite's extended code, as `execute(arguments:)` would.
    ///
    /// The caller's transaction is the store's own `BEGIN IMMEDIATE … COMMIT`, run through GRDB, which reads whether
    /// it is still open from SQLite itself (`isInsideTransaction`); this store registers no transaction observer,
    /// which is what GRDB's own execution path would add here.
    func run(_ values: some Collection<StoredValue>, in db: Database) throws {
        let handle = sqliteStatement
        precondition(values.count == Int(sqlite3_bind_parameter_count(handle)), "one value per parameter")
        sqlite3_reset(handle)
        defer {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
        }
        var index: Int32 = 1
        for value in values {
            let code: Int32
            switch value {
            case .bytes(let bytes):
                code = bytes.withUnsafeBytes { buffer in
                    // A zero-length blob is a blob, not NULL: bind a valid pointer either way.
                    sqlite3_bind_blob(
                        handle,
                        index,
                        buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 1),
                        Int32(buffer.count),
                        Self.transient
                    )
                }
            case .integer(let integer?):
                code = sqlite3_bind_int64(handle, index, integer)
            case .text(let text?):
                // With its length: a NUL inside the text is stored, not an end.
                code = text.withCString { sqlite3_bind_text(handle, index, $0, Int32(text.utf8.count), Self.transient) }
            case .integer(nil), .text(nil):
                code = sqlite3_bind_null(handle, index)
            }
            guard code == SQLITE_OK else { throw Self.error(code, db, sql) }
            index += 1
        }
        let code = sqlite3_step(handle)
        guard code == SQLITE_DONE else {
            throw Self.error(
                code == SQLITE_ROW ? SQLITE_MISUSE : sqlite3_extended_errcode(db.sqliteConnection),
                db,
                sql
            )
        }
    }

    /// `SQLITE_TRANSIENT`, which the C macro defines as `(sqlite3_destructor_type)-1` and Swift does not import.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    private static func error(_ code: Int32, _ db: Database, _ sql: String) -> DatabaseError {
        DatabaseError(
            resultCode: ResultCode(rawValue: code),
            message: String(cString: sqlite3_errmsg(db.sqliteConnection)),
            sql: sql
        )
    }
}
