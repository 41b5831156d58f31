import GRDB

/// The schema, as ordered migrations. Only sealed bytes, a blind index and metadata are stored.
enum SQLiteSchema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE escrow (
                        id BLOB PRIMARY KEY NOT NULL,
                        blind_index BLOB NOT NULL UNIQUE,
                        key_version INTEGER NOT NULL,
                        public_key BLOB NOT NULL,
                        sealed_profile BLOB NOT NULL,
                        sealed_key BLOB NOT NULL,
                        mac BLOB NOT NULL,
                        content_tag BLOB NOT NULL,
                        state TEXT NOT NULL,
                        revision INTEGER NOT NULL,
                        attempts INTEGER NOT NULL,
                        next_attempt_at INTEGER NOT NULL,
                        lease_owner TEXT,
                        lease_expires_at INTEGER,
                        confirm_deadline INTEGER,
                        due_at INTEGER,
                        created_at INTEGER NOT NULL,
                        expires_at INTEGER NOT NULL,
                        updated_at INTEGER NOT NULL,
                        dead_code TEXT,
                        last_status INTEGER
                    ) STRICT;
                    CREATE INDEX escrow_due ON escrow(due_at) WHERE due_at IS NOT NULL;
                    CREATE INDEX escrow_expiry ON escrow(expires_at);

                    CREATE TABLE audit_event (
                        seq INTEGER PRIMARY KEY NOT NULL,
                        at INTEGER NOT NULL,
                        type TEXT NOT NULL,
                        escrow_id TEXT,
                        index_prefix TEXT,
                        detail TEXT,
                        http_status INTEGER,
                        actor TEXT NOT NULL,
                        age_ms INTEGER,
                        hash BLOB NOT NULL
                    ) STRICT;
                    CREATE INDEX audit_event_at ON audit_event(at);

                    CREATE TABLE audit_head (
                        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
                        seq INTEGER NOT NULL,
                        hash BLOB NOT NULL
                    ) STRICT;
                    """
            )
        }
        // v2: the ids of handled Apple notifications (hashes of their `jti`), for duplicate detection.
        // The HTTP API's bearer tokens live in their own file (``SQLiteTokenSchema``).
        migrator.registerMigration("v2") { db in
            try db.execute(
                sql: """
                    CREATE TABLE apple_notification (
                        jti_hash BLOB PRIMARY KEY NOT NULL,
                        received_at INTEGER NOT NULL
                    ) STRICT;
                    CREATE INDEX apple_notification_received ON apple_notification(received_at);
                    """
            )
        }
        // v3: retired master key versions (captures sealed to one are refused in the capture's transaction), and
        // an index for one escrow's audit history (`inspect`).
        migrator.registerMigration("v3") { db in
            try db.execute(
                sql: """
                    CREATE TABLE retired_key_version (
                        version INTEGER PRIMARY KEY NOT NULL,
                        retired_at INTEGER NOT NULL
                    ) STRICT;
                    CREATE INDEX audit_event_escrow ON audit_event(escrow_id) WHERE escrow_id IS NOT NULL;
                    """
            )
        }
        // v4: audit archiving. Each event records the canonical encoding it was hashed in (1 for every event before
        // this version, 2 from now on: see AuditChain), and each archive cut its checkpoint: the sequence and hash of
        // the last event it deleted, where the store's chain now starts.
        migrator.registerMigration("v4") { db in
            try db.execute(
                sql: """
                    ALTER TABLE audit_event ADD COLUMN encoding INTEGER NOT NULL DEFAULT 1;
                    CREATE TABLE audit_checkpoint (
                        seq INTEGER PRIMARY KEY NOT NULL,
                        hash BLOB NOT NULL,
                        first_seq INTEGER NOT NULL,
                        event_count INTEGER NOT NULL,
                        earliest_at INTEGER NOT NULL,
                        latest_at INTEGER NOT NULL,
                        archived_at INTEGER NOT NULL
                    ) STRICT;
                    """
            )
        }
        // v5: web sign-in attempts. Only hashes of the state, nonce, browser binding and ticket are stored; the
        // ticket's result is sealed under a key only the ticket gives. A row lives until `purge_at`: the attempt's
        // expiry, or once used, the later of it and its ticket's.
        migrator.registerMigration("v5") { db in
            try db.execute(
                sql: """
                    CREATE TABLE signin_attempt (
                        state_hash BLOB PRIMARY KEY NOT NULL,
                        nonce_hash BLOB NOT NULL,
                        binding_hash BLOB NOT NULL,
                        return_name TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        expires_at INTEGER NOT NULL,
                        used_at INTEGER,
                        ticket_hash BLOB UNIQUE,
                        ticket_expires_at INTEGER,
                        ticket_result BLOB,
                        redeemed_at INTEGER,
                        purge_at INTEGER NOT NULL
                    ) STRICT;
                    CREATE INDEX signin_attempt_purge ON signin_attempt(purge_at);
                    """
            )
        }
        // v6: the operator's admin API. Each audit event may carry an operator's reason (a requeue or erasure from the
        // console or the admin API; hashed by the v3 encoding). The admin list pages escrows by (created_at, id) with
        // a keyset cursor, alone or within one state or one key version: each a walk of its index, never a sort.
        migrator.registerMigration("v6") { db in
            try db.execute(
                sql: """
                    ALTER TABLE audit_event ADD COLUMN reason TEXT;
                    CREATE INDEX escrow_created ON escrow(created_at, id);
                    CREATE INDEX escrow_state_created ON escrow(state, created_at, id);
                    CREATE INDEX escrow_key_version_created ON escrow(key_version, created_at, id);
                    """
            )
        }
        // v7: the outbox of forwarded Apple notifications: each body sealed to a master key version (crypto_box_seal,
        // docs/FORMAT.md), never in clear. `next_attempt_at` is when an entry is next due, and while a forwarder holds
        // it, the end of its lease. A row lives until it is forwarded, refused, given up, or swept past the retention.
        migrator.registerMigration("v7") { db in
            try db.execute(
                sql: """
                    CREATE TABLE notification_outbox (
                        webhook_id TEXT PRIMARY KEY NOT NULL,
                        key_version INTEGER NOT NULL,
                        sealed_body BLOB NOT NULL,
                        attempts INTEGER NOT NULL,
                        next_attempt_at INTEGER NOT NULL,
                        created_at INTEGER NOT NULL
                    ) STRICT;
                    CREATE INDEX notification_outbox_due ON notification_outbox(next_attempt_at);
                    CREATE INDEX notification_outbox_created ON notification_outbox(created_at);
                    """
            )
        }
        // v8: the app's own value passed through a web sign-in (`appState`), sealed under the attempt's state.
        migrator.registerMigration("v8") { db in
            try db.execute(sql: "ALTER TABLE signin_attempt ADD COLUMN app_state BLOB")
        }
        // v9: the delivery switch, one row for every node sharing the store: while `paused` is 1 no worker claims.
        // `changed_at`, `changed_by` and `reason` are the last pause's or resume's (null until the first).
        migrator.registerMigration("v9") { db in
            try db.execute(
                sql: """
                    CREATE TABLE delivery_control (
                        id INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
                        paused INTEGER NOT NULL,
                        changed_at INTEGER,
                        changed_by TEXT,
                        reason TEXT
                    ) STRICT;
                    INSERT INTO delivery_control (id, paused) VALUES (1, 0);
                    """
            )
        }
        // v10: sign-in from apps. An attempt an app started (`POST /v1/apple/attempts`) is marked: its binding hash is
        // the attempt secret's, its callback needs no cookie, and its ticket redeems only with that secret.
        migrator.registerMigration("v10") { db in
            try db.execute(sql: "ALTER TABLE signin_attempt ADD COLUMN started_by_app INTEGER NOT NULL DEFAULT 0")
        }
        // v11: Apple token exchanges. A sign-in's authorization code waits here for its exchange, sealed to a master
        // key version; the outcome (the refresh token sealed into the escrow, or Apple's error code) stays until the
        // escrow is purged: deleting the escrow's row deletes its exchanges (a trigger: foreign keys are off).
        // Revocations the backend asked for wait in `apple_revocation`, the token sealed until Apple took it.
        migrator.registerMigration("v11") { db in
            try db.execute(
                sql: """
                    CREATE TABLE apple_token_exchange (
                        code_hash BLOB PRIMARY KEY NOT NULL,
                        escrow_id BLOB NOT NULL,
                        client_id TEXT NOT NULL,
                        redirect_uri TEXT,
                        key_version INTEGER NOT NULL,
                        sealed_code BLOB NOT NULL,
                        attempts INTEGER NOT NULL,
                        next_attempt_at INTEGER NOT NULL,
                        created_at INTEGER NOT NULL,
                        expires_at INTEGER NOT NULL,
                        sealed_tokens BLOB,
                        error TEXT,
                        ended_at INTEGER
                    ) STRICT;
                    CREATE INDEX apple_token_exchange_due ON apple_token_exchange(next_attempt_at)
                        WHERE ended_at IS NULL;
                    CREATE INDEX apple_token_exchange_escrow ON apple_token_exchange(escrow_id);
                    CREATE TRIGGER apple_token_exchange_purged AFTER DELETE ON escrow BEGIN
                        DELETE FROM apple_token_exchange WHERE escrow_id = OLD.id;
                    END;

                    CREATE TABLE apple_revocation (
                        id TEXT PRIMARY KEY NOT NULL,
                        client_id TEXT NOT NULL,
                        token_type_hint TEXT NOT NULL,
                        key_version INTEGER NOT NULL,
                        sealed_token BLOB NOT NULL,
                        attempts INTEGER NOT NULL,
                        next_attempt_at INTEGER NOT NULL,
                        created_at INTEGER NOT NULL,
                        outcome TEXT,
                        error TEXT,
                        ended_at INTEGER
                    ) STRICT;
                    CREATE INDEX apple_revocation_due ON apple_revocation(next_attempt_at) WHERE ended_at IS NULL;
                    """
            )
        }
        // v12: the cluster's delivery rate (`--delivery-rate`): one row every worker advances with a compare-and-set.
        // `next_slot_us` is the next free delivery slot in microseconds since 1970; `per_second` the rate last used.
        // And the Apple notifications received, by type and outcome only (never a subject), for the operator.
        migrator.registerMigration("v12") { db in
            try db.execute(
                sql: """
                    CREATE TABLE delivery_rate (
                        id INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
                        per_second REAL,
                        next_slot_us INTEGER NOT NULL
                    ) STRICT;
                    INSERT INTO delivery_rate (id, next_slot_us) VALUES (1, 0);
                    CREATE TABLE apple_notification_event (
                        received_at INTEGER NOT NULL,
                        event_type TEXT NOT NULL,
                        outcome TEXT NOT NULL
                    ) STRICT;
                    CREATE INDEX apple_notification_event_received ON apple_notification_event(received_at);
                    """
            )
        }
        // v13: the console across nodes. Sessions by the hash of their cookie, with the hash of the token that signed
        // in (neither secret is stored); pages held for a form's redirect, sealed under a key only the cookie derives;
        // the overview's backlog, one sample a 5-minute slot (any node writes it; a day is kept); and the purge
        // report's checkpoint: the chain verified up to `through_seq` with hash `head_hash`, and the report's counts
        // up to there, so a load reads only the events after it.
        migrator.registerMigration("v13") { db in
            try db.execute(
                sql: """
                    CREATE TABLE console_session (
                        id_hash BLOB PRIMARY KEY NOT NULL,
                        token_hash BLOB NOT NULL,
                        created_at INTEGER NOT NULL,
                        last_seen_at INTEGER NOT NULL,
                        expires_at INTEGER NOT NULL
                    ) STRICT, WITHOUT ROWID;
                    CREATE INDEX console_session_token ON console_session (token_hash, created_at);
                    CREATE INDEX console_session_seen ON console_session (last_seen_at);
                    CREATE INDEX console_session_expiry ON console_session (expires_at);
                    CREATE TABLE console_held_page (
                        result_hash BLOB PRIMARY KEY NOT NULL,
                        session_hash BLOB NOT NULL,
                        status INTEGER NOT NULL,
                        sealed BLOB NOT NULL,
                        expires_at INTEGER NOT NULL
                    ) STRICT;
                    CREATE INDEX console_held_page_session ON console_held_page (session_hash, expires_at);
                    CREATE TABLE backlog_sample (
                        slot INTEGER PRIMARY KEY NOT NULL,
                        at INTEGER NOT NULL,
                        pending INTEGER NOT NULL,
                        dead INTEGER NOT NULL,
                        oldest_pending_age_s INTEGER
                    ) STRICT;
                    CREATE TABLE purge_report_checkpoint (
                        id INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
                        from_seq INTEGER NOT NULL,
                        through_seq INTEGER NOT NULL,
                        head_hash BLOB NOT NULL,
                        verified_at INTEGER NOT NULL,
                        tallies BLOB NOT NULL
                    ) STRICT;
                    """
            )
        }
        // v14: the profile box's key, sealed under the key box's (docs/FORMAT.md, "The profile box key"): lets a
        // replay open an escrow with one X25519 multiplication instead of two. Empty for the escrows sealed before.
        migrator.registerMigration("v14") { db in
            try db.execute(sql: "ALTER TABLE escrow ADD COLUMN profile_box_key BLOB NOT NULL DEFAULT x''")
        }
        // v15: a ticket names its attempt (docs/FORMAT.md, "A sign-in's ticket"), so its hash is kept in
        // `ticket_check`, which has no index, and checked in the row the state hash finds: storing a ticket no longer
        // writes a random page of a ticket index. `ticket_hash` stays for the tickets issued before, unique among
        // the rows that have one; the table is rebuilt because a column's UNIQUE cannot be dropped, and its index
        // held an entry (NULL) for every attempt, written at its start. Attempts live minutes: the copy is small.
        migrator.registerMigration("v15") { db in
            try db.execute(
                sql: """
                    CREATE TABLE signin_attempt_v15 (
                        state_hash BLOB PRIMARY KEY NOT NULL,
                        nonce_hash BLOB NOT NULL,
                        binding_hash BLOB NOT NULL,
                        return_name TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        expires_at INTEGER NOT NULL,
                        used_at INTEGER,
                        ticket_hash BLOB,
                        ticket_expires_at INTEGER,
                        ticket_result BLOB,
                        redeemed_at INTEGER,
                        purge_at INTEGER NOT NULL,
                        app_state BLOB,
                        started_by_app INTEGER NOT NULL DEFAULT 0,
                        ticket_check BLOB
                    ) STRICT;
                    INSERT INTO signin_attempt_v15 (state_hash, nonce_hash, binding_hash, return_name, created_at,
                        expires_at, used_at, ticket_hash, ticket_expires_at, ticket_result, redeemed_at, purge_at,
                        app_state, started_by_app)
                    SELECT state_hash, nonce_hash, binding_hash, return_name, created_at, expires_at, used_at,
                        ticket_hash, ticket_expires_at, ticket_result, redeemed_at, purge_at, app_state, started_by_app
                    FROM signin_attempt;
                    DROP TABLE signin_attempt;
                    ALTER TABLE signin_attempt_v15 RENAME TO signin_attempt;
                    CREATE INDEX signin_attempt_purge ON signin_attempt(purge_at);
                    CREATE UNIQUE INDEX signin_attempt_ticket_hash ON signin_attempt(ticket_hash)
                        WHERE ticket_hash IS NOT NULL;
                    """
            )
        }
        // v16: an exchange is its escrow's code, keyed by (escrow_id, code_hash) in a table without rowids, in the
        // escrow ids' time order: queueing a sign-in's code appends to the table and its due index, where a key of
        // the code's hash alone wrote a random page of its index for every sign-in (and the escrow's index was a
        // third B-tree). A code is still queued once: it belongs to one user, who has one escrow at a time. The
        // exchanges, ended ones holding sealed refresh tokens, are copied; the purge trigger is made again around
        // the rebuild, as it names the table.
        migrator.registerMigration("v16") { db in
            try db.execute(
                sql: """
                    DROP TRIGGER apple_token_exchange_purged;
                    CREATE TABLE apple_token_exchange_v16 (
                        escrow_id BLOB NOT NULL,
                        code_hash BLOB NOT NULL,
                        client_id TEXT NOT NULL,
                        redirect_uri TEXT,
                        key_version INTEGER NOT NULL,
                        sealed_code BLOB NOT NULL,
                        attempts INTEGER NOT NULL,
                        next_attempt_at INTEGER NOT NULL,
                        created_at INTEGER NOT NULL,
                        expires_at INTEGER NOT NULL,
                        sealed_tokens BLOB,
                        error TEXT,
                        ended_at INTEGER,
                        PRIMARY KEY (escrow_id, code_hash)
                    ) STRICT, WITHOUT ROWID;
                    INSERT INTO apple_token_exchange_v16 SELECT escrow_id, code_hash, client_id, redirect_uri,
                        key_version, sealed_code, attempts, next_attempt_at, created_at, expires_at, sealed_tokens,
                        error, ended_at
                    FROM apple_token_exchange;
                    DROP TABLE apple_token_exchange;
                    ALTER TABLE apple_token_exchange_v16 RENAME TO apple_token_exchange;
                    CREATE INDEX apple_token_exchange_due ON apple_token_exchange(next_attempt_at)
                        WHERE ended_at IS NULL;
                    CREATE TRIGGER apple_token_exchange_purged AFTER DELETE ON escrow BEGIN
                        DELETE FROM apple_token_exchange WHERE escrow_id = OLD.id;
                    END;
                    """
            )
        }
        return migrator
    }
}
