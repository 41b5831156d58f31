#ifndef CSQLITESHIM_H
#define CSQLITESHIM_H

// Written by hand because sqlite3_db_config is variadic, and Swift cannot call a variadic C function:
// neither GRDB nor any package here exposes SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE.
typedef struct sqlite3 sqlite3;

/// Keeps this connection from checkpointing the WAL when it is the last one to close the database.
/// Returns an SQLite result code (0 on success).
int profile_escrow_sqlite3_disable_checkpoint_on_close(sqlite3 *db);

#endif
