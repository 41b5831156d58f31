import GRDB

/// The token file's schema (``SQLiteTokenStore``), apart from the escrow database's ``SQLiteSchema``.
enum SQLiteTokenSchema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        // The HTTP API's bearer tokens: name, scopes and the BLAKE2b-256 hash of the token.
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE access_token (
                        name TEXT PRIMARY KEY NOT NULL,
                        token_hash BLOB NOT NULL UNIQUE,
                        scopes TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        revoked_at INTEGER
                    ) STRICT;
                    """
            )
        }
        return migrator
    }
}
