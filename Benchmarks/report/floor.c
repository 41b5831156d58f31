// The purge report's floor, in C: read every audit event's columns with raw SQLite calls (report), and with
// --verify also rebuild the canonical bytes and chain-hash them with libsodium's BLAKE2b. Nothing else: no
// percentiles, no formatting. Built and run by Benchmarks/report/report-vs-floor.sh.
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

static void field(unsigned char *out, size_t *n, const unsigned char *value, int length) {
    out[(*n)++] = (unsigned char)(length >> 24); out[(*n)++] = (unsigned char)(length >> 16);
    out[(*n)++] = (unsigned char)(length >> 8); out[(*n)++] = (unsigned char)length;
    if (length > 0) memcpy(out + *n, value, (size_t)length);
    *n += (size_t)length;
}

int main(int argc, char **argv) {
    if (argc < 2 || sodium_init() < 0) return 2;
    int verify = argc > 2 && strcmp(argv[2], "--verify") == 0;
    sqlite3 *db;
    if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) return 2;
    sqlite3_stmt *statement;
    sqlite3_prepare_v2(db, "SELECT seq, at, type, escrow_id, index_prefix, detail, http_status, actor, age_ms, hash "
                           "FROM audit_event ORDER BY seq", -1, &statement, NULL);
    unsigned char previous[32] = {0}, buffer[4096];
    long events = 0, captured = 0, purged = 0, broken = 0;
    while (sqlite3_step(statement) == SQLITE_ROW) {
        events++;
        const unsigned char *type = sqlite3_column_text(statement, 2);
        if (type && type[0] == 'c' && strcmp((const char *)type, "captured") == 0) captured++;
        if (type && type[0] == 'p' && strcmp((const char *)type, "purged") == 0) purged++;
        if (!verify) { (void)sqlite3_column_int64(statement, 8); continue; }
        size_t n = 0;
        memcpy(buffer, previous, 32); n = 32;
        memcpy(buffer + n, "pe-audit-1", 10); n += 10;
        char number[32];
        for (int column = 0; column < 9; column++) {
            if (column == 0 || column == 1 || column == 6 || column == 8) {
                if (sqlite3_column_type(statement, column) == SQLITE_NULL) { field(buffer, &n, NULL, 0); continue; }
                int length = snprintf(number, sizeof number, "%lld", (long long)sqlite3_column_int64(statement, column));
                field(buffer, &n, (const unsigned char *)number, length);
            } else {
                const unsigned char *text = sqlite3_column_text(statement, column);
                field(buffer, &n, text, text ? sqlite3_column_bytes(statement, column) : 0);
            }
        }
        unsigned char hash[32];
        crypto_generichash(hash, 32, buffer, n, NULL, 0);
        const void *stored = sqlite3_column_blob(statement, 9);
        if (sqlite3_column_bytes(statement, 9) != 32 || memcmp(stored, hash, 32) != 0) broken++;
        memcpy(previous, hash, 32);
    }
    printf("%ld events, %ld captured, %ld purged, %ld broken\n", events, captured, purged, broken);
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return broken ? 1 : 0;
}
