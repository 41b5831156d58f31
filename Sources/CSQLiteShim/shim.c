#include <sqlite3.h>
#include "CSQLiteShim.h"

int profile_escrow_sqlite3_disable_checkpoint_on_close(sqlite3 *db) {
    int enabled = 0;
    int code = sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, &enabled);
    if (code == SQLITE_OK && enabled != 1) return SQLITE_ERROR;
    return code;
}
