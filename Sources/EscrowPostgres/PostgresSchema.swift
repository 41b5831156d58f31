import EscrowCore
import Foundation
import Logging
import PostgresNIO

/// The schema, as numbered migrations recorded in `schema_migrations`. Only sealed bytes, a blind index
/// and metadata are stored: times as bigint milliseconds since 1970, bytes as bytea.
///
/// Migrations run in one transaction under `pg_advisory_xact_lock`: nodes starting at once wait for
/// each other, and each migration is applied exactly once. A role without the right to create tables
/// (the service role) opens a store whose schema is current without taking the lock at all.
enum PostgresSchema {
    struct Migration: Sendable {
        let version: Int64
        let name: String
        let statements: [String]
    }

    /// `pg_advisory_xact_lock`'s key: "escrow" in ASCII, so that it names this program in `pg_locks`.
    static let advisoryLockKey: Int64 = 0x6573_6372_6F77

    static let migrations: [Migration] = [
        Migration(
            version: 1,
            name: "escrow, audit chain, notifications, retired key versions, access tokens",
            statements: [
                """
                CREATE TABLE escrow (
                    row_id bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
                    id bytea PRIMARY KEY,
                    blind_index bytea NOT NULL,
                    key_version bigint NOT NULL,
                    public_key bytea NOT NULL,
                    sealed_profile bytea NOT NULL,
                    sealed_key bytea NOT NULL,
                    mac bytea NOT NULL,
                    content_tag bytea NOT NULL,
                    state text NOT NULL,
                    revision bigint NOT NULL,
                    attempts bigint NOT NULL,
                    next_attempt_at bigint NOT NULL,
                    lease_owner text,
                    lease_expires_at bigint,
                    confirm_deadline bigint,
                    due_at bigint,
                    created_at bigint NOT NULL,
                    expires_at bigint NOT NULL,
                    updated_at bigint NOT NULL,
                    dead_code text,
                    last_status bigint
                )
                """,
                // One live escrow per user.
                "CREATE UNIQUE INDEX escrow_blind_index ON escrow (blind_index)",
                "CREATE INDEX escrow_due ON escrow (due_at) WHERE due_at IS NOT NULL",
                "CREATE INDEX escrow_expiry ON escrow (expires_at)",
                """
                CREATE TABLE audit_event (
                    seq bigint PRIMARY KEY,
                    at bigint NOT NULL,
                    type text NOT NULL,
                    escrow_id text,
                    index_prefix text,
                    detail text,
                    http_status bigint,
                    actor text NOT NULL,
                    age_ms bigint,
                    hash bytea NOT NULL
                )
                """,
                "CREATE INDEX audit_event_at ON audit_event (at)",
                "CREATE INDEX audit_event_escrow ON audit_event (escrow_id) WHERE escrow_id IS NOT NULL",
                """
                CREATE TABLE audit_head (
                    singleton integer PRIMARY KEY CHECK (singleton = 1),
                    seq bigint NOT NULL,
                    hash bytea NOT NULL
                )
                """,
                """
                CREATE TABLE apple_notification (
                    jti_hash bytea PRIMARY KEY,
                    received_at bigint NOT NULL
                )
                """,
                "CREATE INDEX apple_notification_received ON apple_notification (received_at)",
                """
                CREATE TABLE retired_key_version (
                    version bigint PRIMARY KEY,
                    retired_at bigint NOT NULL
                )
                """,
                """
                CREATE TABLE access_token (
                    name text PRIMARY KEY,
                    token_hash bytea NOT NULL UNIQUE,
                    scopes text NOT NULL,
                    created_at bigint NOT NULL,
                    revoked_at bigint
                )
                """,
            ]
        ),
        Migration(
            version: 2,
            name: "audit archiving: event encodings, archive checkpoints",
            statements: [
                // Every event before this migration was hashed in encoding 1; from now on, 2 (see AuditChain). A
                // constant default: PostgreSQL adds the column without rewriting the table.
                "ALTER TABLE audit_event ADD COLUMN encoding bigint NOT NULL DEFAULT 1",
                """
                CREATE TABLE audit_checkpoint (
                    seq bigint PRIMARY KEY,
                    hash bytea NOT NULL,
                    first_seq bigint NOT NULL,
                    event_count bigint NOT NULL,
                    earliest_at bigint NOT NULL,
                    latest_at bigint NOT NULL,
                    archived_at bigint NOT NULL
                )
                """,
            ]
        ),
        Migration(
            version: 3,
            name: "web sign-in attempts",
            statements: [
                // Only hashes of the state, nonce, browser binding and ticket; the ticket's result sealed under a key
                // only the ticket gives. A row lives until `purge_at`: the attempt's expiry, or once used, the later
                // of it and its ticket's.
                """
                CREATE TABLE signin_attempt (
                    state_hash bytea PRIMARY KEY,
                    nonce_hash bytea NOT NULL,
                    binding_hash bytea NOT NULL,
                    return_name text NOT NULL,
                    created_at bigint NOT NULL,
                    expires_at bigint NOT NULL,
                    used_at bigint,
                    ticket_hash bytea UNIQUE,
                    ticket_expires_at bigint,
                    ticket_result bytea,
                    redeemed_at bigint,
                    purge_at bigint NOT NULL
                )
                """,
                "CREATE INDEX signin_attempt_purge ON signin_attempt (purge_at)",
            ]
        ),
        Migration(
            version: 4,
            name: "admin API: operator reasons, keyset list indexes",
            statements: [
                // An operator's reason on a requeue or erasure (hashed by the v3 encoding); null for every other event.
                "ALTER TABLE audit_event ADD COLUMN reason text",
                // The admin list pages escrows by (created_at, id) with a keyset cursor, alone or within one state or
                // one key version: each a walk of its index, never a sort. IF NOT EXISTS: an operator may build them first
                // with CREATE INDEX CONCURRENTLY (docs/operations.md, "Roles and migrations").
                "CREATE INDEX IF NOT EXISTS escrow_created ON escrow (created_at, id)",
                "CREATE INDEX IF NOT EXISTS escrow_state_created ON escrow (state, created_at, id)",
                "CREATE INDEX IF NOT EXISTS escrow_key_version_created ON escrow (key_version, created_at, id)",
            ]
        ),
        Migration(
            version: 5,
            name: "notification outbox",
            statements: [
                // Forwarded Apple notifications, each body sealed to a master key version (crypto_box_seal,
                // docs/FORMAT.md), never in clear. `next_attempt_at` is when an entry is next due, and while a
                // forwarder holds it, the end of its lease.
                """
                CREATE TABLE notification_outbox (
                    webhook_id text PRIMARY KEY,
                    key_version bigint NOT NULL,
                    sealed_body bytea NOT NULL,
                    attempts bigint NOT NULL,
                    next_attempt_at bigint NOT NULL,
                    created_at bigint NOT NULL
                )
                """,
                "CREATE INDEX notification_outbox_due ON notification_outbox (next_attempt_at)",
                "CREATE INDEX notification_outbox_created ON notification_outbox (created_at)",
            ]
        ),
        Migration(
            version: 6,
            name: "sign-in app state",
            statements: [
                // The app's own value passed through a web sign-in (`appState`), sealed under the attempt's state.
                "ALTER TABLE signin_attempt ADD COLUMN app_state bytea"
            ]
        ),
        Migration(
            version: 7,
            name: "delivery switch",
            statements: [
                // One row for every node: while `paused`, no worker claims. `changed_at`, `changed_by` and `reason`
                // are the last pause's or resume's (null until the first).
                """
                CREATE TABLE delivery_control (
                    id smallint PRIMARY KEY CHECK (id = 1),
                    paused boolean NOT NULL,
                    changed_at bigint,
                    changed_by text,
                    reason text
                )
                """,
                "INSERT INTO delivery_control (id, paused) VALUES (1, false)",
            ]
        ),
        Migration(
            version: 8,
            name: "sign-in from apps",
            statements: [
                // An attempt an app started (`POST /v1/apple/attempts`): its binding hash is the attempt secret's, its
                // callback needs no cookie, and its ticket redeems only with that secret.
                "ALTER TABLE signin_attempt ADD COLUMN started_by_app boolean NOT NULL DEFAULT false"
            ]
        ),
        Migration(
            version: 9,
            name: "Apple token exchanges",
            statements: [
                // A sign-in's authorization code waits here for its exchange, sealed to a master key version; the
                // outcome (the refresh token sealed into the escrow, or Apple's error code) stays until the escrow is
                // purged: deleting the escrow's row deletes its exchanges.
                """
                CREATE TABLE apple_token_exchange (
                    code_hash bytea PRIMARY KEY,
                    escrow_id bytea NOT NULL REFERENCES escrow (id) ON DELETE CASCADE,
                    client_id text NOT NULL,
                    redirect_uri text,
                    key_version bigint NOT NULL,
                    sealed_code bytea NOT NULL,
                    attempts bigint NOT NULL,
                    next_attempt_at bigint NOT NULL,
                    created_at bigint NOT NULL,
                    expires_at bigint NOT NULL,
                    sealed_tokens bytea,
                    error text,
                    ended_at bigint
                )
                """,
                "CREATE INDEX apple_token_exchange_due ON apple_token_exchange (next_attempt_at) WHERE ended_at IS NULL",
                "CREATE INDEX apple_token_exchange_escrow ON apple_token_exchange (escrow_id)",
                // Revocations the backend asked for, the token sealed until Apple took it.
                """
                CREATE TABLE apple_revocation (
                    id text PRIMARY KEY,
                    client_id text NOT NULL,
                    token_type_hint text NOT NULL,
                    key_version bigint NOT NULL,
                    sealed_token bytea NOT NULL,
                    attempts bigint NOT NULL,
                    next_attempt_at bigint NOT NULL,
                    created_at bigint NOT NULL,
                    outcome text,
                    error text,
                    ended_at bigint
                )
                """,
                "CREATE INDEX apple_revocation_due ON apple_revocation (next_attempt_at) WHERE ended_at IS NULL",
            ]
        ),
        Migration(
            version: 10,
            name: "delivery rate, Apple notification events",
            statements: [
                // The cluster's delivery rate (`--delivery-rate`): one row every worker advances with a compare-and-set.
                // `next_slot_us` is the next free delivery slot in microseconds since 1970; `per_second` the rate
                // last used.
                """
                CREATE TABLE delivery_rate (
                    id smallint PRIMARY KEY CHECK (id = 1),
                    per_second double precision,
                    next_slot_us bigint NOT NULL
                )
                """,
                "INSERT INTO delivery_rate (id, next_slot_us) VALUES (1, 0)",
                // The Apple notifications received, by type and outcome only (never a subject), for the operator. No
                // serial key: the service role writes no sequence.
                """
                CREATE TABLE apple_notification_event (
                    received_at bigint NOT NULL,
                    event_type text NOT NULL,
                    outcome text NOT NULL
                )
                """,
                "CREATE INDEX apple_notification_event_received ON apple_notification_event (received_at)",
            ]
        ),
        Migration(
            version: 11,
            name: "console sessions, backlog history, purge report checkpoint",
            statements: [
                // Sessions by the hash of their cookie, with the hash of the token that signed in (neither secret is
                // stored); pages held for a form's redirect, sealed under a key only the cookie derives.
                """
                CREATE TABLE console_session (
                    id_hash bytea PRIMARY KEY,
                    token_hash bytea NOT NULL,
                    created_at bigint NOT NULL,
                    last_seen_at bigint NOT NULL,
                    expires_at bigint NOT NULL
                )
                """,
                "CREATE INDEX console_session_token ON console_session (token_hash, created_at)",
                "CREATE INDEX console_session_seen ON console_session (last_seen_at)",
                "CREATE INDEX console_session_expiry ON console_session (expires_at)",
                """
                CREATE TABLE console_held_page (
                    result_hash bytea PRIMARY KEY,
                    session_hash bytea NOT NULL,
                    status integer NOT NULL,
                    sealed bytea NOT NULL,
                    expires_at bigint NOT NULL
                )
                """,
                "CREATE INDEX console_held_page_session ON console_held_page (session_hash, expires_at)",
                // The overview's backlog, one sample a 5-minute slot (any node writes it; a day is kept).
                """
                CREATE TABLE backlog_sample (
                    slot bigint PRIMARY KEY,
                    at bigint NOT NULL,
                    pending bigint NOT NULL,
                    dead bigint NOT NULL,
                    oldest_pending_age_s bigint
                )
                """,
                // The purge report's checkpoint: the chain verified up to `through_seq` with hash `head_hash`, and the
                // report's counts up to there, so a load reads only the events after it.
                """
                CREATE TABLE purge_report_checkpoint (
                    id smallint PRIMARY KEY CHECK (id = 1),
                    from_seq bigint NOT NULL,
                    through_seq bigint NOT NULL,
                    head_hash bytea NOT NULL,
                    verified_at bigint NOT NULL,
                    tallies bytea NOT NULL
                )
                """,
            ]
        ),
        Migration(
            version: 12,
            name: "the profile box key",
            statements: [
                // The profile box's key, sealed under the key box's (docs/FORMAT.md, "The profile box key"): lets a
                // replay open an escrow with one X25519 multiplication instead of two. Empty for the escrows sealed
                // before. A constant default: PostgreSQL adds the column without rewriting the table.
                "ALTER TABLE escrow ADD COLUMN profile_box_key bytea NOT NULL DEFAULT ''::bytea",
            ]
        ),
        Migration(
            version: 13,
            name: "tickets found by their attempt",
            statements: [
                // A ticket names its attempt (docs/FORMAT.md, "A sign-in's ticket"): its hash is kept in
                // `ticket_check`, which has no index, and checked in the row the state hash finds, so storing a ticket
                // changes no indexed column (the update can stay on its page). `ticket_hash` stays for the tickets
                // issued before, unique among the rows that have one: a partial index holds no entry for the NULL of
                // every attempt since.
                "ALTER TABLE signin_attempt ADD COLUMN ticket_check bytea",
                "ALTER TABLE signin_attempt DROP CONSTRAINT signin_attempt_ticket_hash_key",
                """
                CREATE UNIQUE INDEX signin_attempt_ticket_hash ON signin_attempt (ticket_hash)
                WHERE ticket_hash IS NOT NULL
                """,
            ]
        ),
    ]

    static var latestVersion: Int64 { migrations.last?.version ?? 0 }

    /// The highest version applied, 0 when the table is missing.
    static func appliedVersion(_ connection: PostgresConnection, logger: Logger) async throws -> Int64 {
        let exists =
            try await connection.query(
                "SELECT to_regclass('schema_migrations') IS NOT NULL",
                logger: logger
            ).collect().map { try $0.decode(Bool.self) }.first ?? false
        guard exists else { return 0 }
        return try await connection.query(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
            logger: logger
        ).collect().map { try $0.decode(Int64.self) }.first ?? 0
    }

    /// Applies what is missing, under the advisory lock, in one transaction. Returns the versions applied. Runs
    /// through `database`'s bounded waits, like every other operation: a server lost during the migration fails it
    /// rather than hang the node's start.
    static func migrate(_ database: StoreDatabase, logger: Logger) async throws -> [Int64] {
        let current = try await database.withConnection("cannot read the schema version") {
            try await appliedVersion($0, logger: logger)
        }
        try requireKnown(current)
        guard current < latestVersion else { return [] }
        return try await database.withConnection("cannot migrate the schema") { connection in
            do {
                return try await apply(connection, logger: logger)
            } catch let error as PostgresTransactionError {
                let failure = error.closureError ?? error.commitError ?? error.beginError
                guard let failure = failure as? PSQLError, failure.serverInfo?[.sqlState] == "42501" else {
                    throw error
                }
                throw EscrowStoreError(
                    .schema,
                    "the database's schema is at version \(current), this program needs \(latestVersion), and this "
                        + "role may not create tables: open it once with the migration role (see docs/operations.md, "
                        + "PostgreSQL)"
                )
            }
        }
    }

    private static func apply(_ connection: PostgresConnection, logger: Logger) async throws -> [Int64] {
        try await connection.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(advisoryLockKey))", logger: logger)
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version bigint PRIMARY KEY,
                    name text NOT NULL,
                    applied_at bigint NOT NULL
                )
                """,
                logger: logger
            )
            // Another node may have applied them while this one waited for the lock.
            let applied = try await appliedVersion(connection, logger: logger)
            try requireKnown(applied)
            var done: [Int64] = []
            for migration in migrations where migration.version > applied {
                for statement in migration.statements {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                let now = Timestamp.unixMilliseconds(Date())
                try await connection.query(
                    """
                    INSERT INTO schema_migrations (version, name, applied_at)
                    VALUES (\(migration.version), \(migration.name), \(now))
                    """,
                    logger: logger
                )
                done.append(migration.version)
            }
            return done
        }
    }

    /// Fails unless the schema is exactly the one this program knows (for a store that must not migrate).
    static func requireCurrent(_ database: StoreDatabase, logger: Logger) async throws {
        let current = try await database.withConnection("cannot read the schema version") {
            try await appliedVersion($0, logger: logger)
        }
        try requireKnown(current)
        guard current == latestVersion else {
            throw EscrowStoreError(
                .schema,
                "the database's schema is at version \(current), this program needs \(latestVersion): "
                    + "open it once with the migration role (see docs/operations.md, PostgreSQL)"
            )
        }
    }

    private static func requireKnown(_ version: Int64) throws {
        guard version <= latestVersion else {
            throw EscrowStoreError(
                .schema,
                "the database's schema is at version \(version), newer than this program's \(latestVersion): upgrade it"
            )
        }
    }
}
