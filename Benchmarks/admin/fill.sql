-- Fills a store made by `profile-escrow` (its schema, one captured escrow as the template row) with :n escrows in the
-- store's real row format: the template's sealed columns (real sizes; a listing never opens them), a random id and
-- blind index per row, created one second apart before the template, 1 in 20 dead (attempts_exhausted, or
-- backend_rejected for 1 in 40), the rest pending; and a `captured` audit event a row within the last 24 hours, so the
-- overview counts a day's worth. A fast path for the fill only: these events carry no valid chain hash, so the audit
-- chain of a benchmark store does not verify (the measured queries never read it).
PRAGMA journal_mode = WAL;
PRAGMA synchronous = OFF;
BEGIN;
CREATE TEMP TABLE template AS SELECT * FROM escrow LIMIT 1;
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < :n)
INSERT INTO escrow (id, blind_index, key_version, public_key, sealed_profile, sealed_key, mac, content_tag, state,
    revision, attempts, next_attempt_at, lease_owner, lease_expires_at, confirm_deadline, due_at, created_at,
    expires_at, updated_at, dead_code, last_status)
SELECT randomblob(16), randomblob(32), t.key_version, t.public_key, t.sealed_profile, t.sealed_key, t.mac,
    t.content_tag,
    CASE WHEN i % 20 = 0 THEN 'dead' ELSE 'pending' END,
    1,
    CASE WHEN i % 20 = 0 THEN 3 ELSE 0 END,
    t.created_at - (:n - i + 1) * 1000, NULL, NULL, NULL,
    CASE WHEN i % 20 = 0 THEN NULL ELSE t.created_at - (:n - i + 1) * 1000 END,
    t.created_at - (:n - i + 1) * 1000,
    t.expires_at - (:n - i + 1) * 1000,
    t.created_at - (:n - i + 1) * 1000,
    CASE WHEN i % 40 = 0 THEN 'backend_rejected' WHEN i % 20 = 0 THEN 'attempts_exhausted' END,
    CASE WHEN i % 40 = 0 THEN 410 END
FROM c, template t;
INSERT INTO audit_event (seq, at, type, escrow_id, index_prefix, detail, http_status, actor, age_ms, hash, encoding)
SELECT (SELECT COALESCE(MAX(seq), 0) FROM audit_event) + rowid, MAX(created_at, (SELECT created_at FROM template)
    - 86000000), 'captured', lower(hex(id)), lower(hex(substr(blind_index, 1, 8))), NULL, NULL, 'http:registration',
    NULL, randomblob(32), 2
FROM escrow WHERE id NOT IN (SELECT id FROM template);
UPDATE audit_head SET seq = (SELECT MAX(seq) FROM audit_event);
COMMIT;
ANALYZE;
