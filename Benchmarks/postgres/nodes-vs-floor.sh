#!/usr/bin/env bash
# Capture and replay on PostgreSQL, with one node and with two, beside a floor: the same transactions run raw by
# pgbench against copies of the same tables (same columns, same indexes), in one run on one server.
#   Benchmarks/postgres/nodes-vs-floor.sh [seconds] [connections]        (BIN=<release profile-escrow>)
#
# Ours: `serve --no-worker` under wrk (`connections` in all, split over the nodes), then `replay --once` of everything
# captured to an instant loopback backend (nginx answering 200), `--concurrency` split over the nodes the same way.
# Two nodes are two processes sharing the store, as two machines would.
# Floor: pgbench with `connections` clients, each transaction for BATCH escrows (default 32, about what one of our
# group commits carries under this load), as ours batches them. Its capture: the audit head locked and advanced, the
# escrow rows (sizes as ours wrote them) and their `captured` events inserted. Its replay: claim BATCH due escrows
# (`FOR UPDATE SKIP LOCKED`, the leases written) and commit, then delete them and append their `purged` events in a
# second transaction: a delivery's two commits, without the crypto, the JSON or the HTTP.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=Benchmarks/lib/instant-backend.sh
. Benchmarks/lib/instant-backend.sh
seconds=${1:-10}
connections=${2:-64}
batch=${BATCH:-32}
command -v wrk >/dev/null || apt-get install -y -qq wrk >/dev/null
if [ -z "${BIN:-}" ]; then
    swift build -c release --product profile-escrow 2>&1 | tail -n 1
    BIN="$(swift build -c release --show-bin-path)/profile-escrow"
fi
eval "$(scripts/postgres.sh start)"
work=$(mktemp -d)
chmod 755 "$work"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    instant_backend_stop "$work"
    scripts/postgres.sh stop >/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
export PROFILE_ESCROW_DATABASE="$PROFILE_ESCROW_TEST_POSTGRES_URL" PROFILE_ESCROW_KEYRING="$work/keyring"
pg_user=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.urlparse(sys.argv[1]).username)' "$PROFILE_ESCROW_DATABASE")
pg_port=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.urlparse(sys.argv[1]).port)' "$PROFILE_ESCROW_DATABASE")
psql() { "$PROFILE_ESCROW_TEST_POSTGRES_BIN/psql" -h 127.0.0.1 -p "$pg_port" -U "$pg_user" -d profile_escrow_test -qAt "$@"; }
pgbench() { "$PROFILE_ESCROW_TEST_POSTGRES_BIN/pgbench" -h 127.0.0.1 -p "$pg_port" -U "$pg_user" "$@" profile_escrow_test; }

instant_backend_start "$work" 18081

"$BIN" keys init >/dev/null
token=$("$BIN" tokens add load --scope capture | tail -n 1)
export PROFILE_ESCROW_WEBHOOK_SECRET
PROFILE_ESCROW_WEBHOOK_SECRET=$("$BIN" webhook-secret)
live() { psql -c "SELECT COUNT(*) FROM escrow"; }

# Ours with `nodes` processes: captures/s, then purges/s of everything captured.
ours() {
    local nodes=$1 per=$((connections / $1)) ports=() node before after start end
    for node in $(seq 1 "$nodes"); do
        ports+=($((18090 + node)))
        "$BIN" serve --host 127.0.0.1 --port "${ports[-1]}" --no-worker --rate-limit 1000000 --rate-burst 1000000 \
            > "$work/serve-$nodes-$node.log" 2>&1 &
        pids+=($!)
        for _ in $(seq 1 50); do curl -fs "http://127.0.0.1:${ports[-1]}/healthz" >/dev/null && break; sleep 0.2; done
    done
    before=$(live)
    local loads=()
    for port in "${ports[@]}"; do
        RUN_ID="$(date +%s)$port" TOKEN="$token" wrk -t1 -c"$per" -d"${seconds}s" -s Benchmarks/http/capture.lua \
            "http://127.0.0.1:$port" > "$work/wrk-$nodes-$port.txt" &
        loads+=($!)
    done
    for load in "${loads[@]}"; do wait "$load"; done
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    pids=()
    after=$(live)
    local captured=$((after - before))
    start=$(date +%s.%N)
    for node in $(seq 1 "$nodes"); do
        "$BIN" replay --once --concurrency "$per" --backend http://127.0.0.1:18081/register \
            > "$work/replay-$nodes-$node.txt" 2>&1 &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    pids=()
    end=$(date +%s.%N)
    [ "$(live)" = 0 ] || { echo "ours, $nodes node(s): $(live) escrows left after replay" >&2; exit 1; }
    python3 -c "c, s, a, b = $captured, $seconds, $start, $end; print(f'{c / s:.0f} {c / (b - a):.0f} {c}')" \
        > "$work/ours-$nodes"
    read -r capture_rate purge_rate count < "$work/ours-$nodes"
    echo "ours, $nodes node(s): $capture_rate captures/s, $purge_rate purges/s ($count escrows)"
}

ours 1
ours 2

# The floor: the same tables, copied with their indexes.
psql <<'SQL'
CREATE TABLE floor_escrow (LIKE escrow INCLUDING ALL);
CREATE TABLE floor_audit_event (LIKE audit_event INCLUDING ALL);
CREATE TABLE floor_audit_head (LIKE audit_head INCLUDING ALL);
INSERT INTO floor_audit_head SELECT * FROM audit_head;
SQL
# Byte sizes as ours wrote them (read from the audit-free part of a fresh capture: the sealed columns' lengths).
"$BIN" serve --host 127.0.0.1 --port 18099 --no-worker > "$work/serve-sizes.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 50); do curl -fs http://127.0.0.1:18099/healthz >/dev/null && break; sleep 0.2; done
curl -fs -o /dev/null -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d '{"userIdentifier":"000000.sizes0000000000000000000000.0001","fullName":{"givenName":"Testy","familyName":"Sizes"},"email":"sizes@example.invalid"}' \
    http://127.0.0.1:18099/v1/escrows
kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true; pids=()
read -r profile_bytes key_bytes < <(psql -F ' ' -c "SELECT length(sealed_profile), length(sealed_key) FROM escrow LIMIT 1")
cat > "$work/capture.sql" <<SQL
BEGIN;
UPDATE floor_audit_head SET seq = seq + $batch, hash = sha256(hash) WHERE singleton = 1 RETURNING seq \gset
INSERT INTO floor_escrow (id, blind_index, key_version, public_key, sealed_profile, sealed_key, mac, content_tag, state,
    revision, attempts, next_attempt_at, due_at, created_at, expires_at, updated_at)
SELECT int8send(t) || substr(sha256((random() + g)::text::bytea), 1, 8), sha256(random()::text::bytea), 1,
    sha256(random()::text::bytea), substr(decode(repeat(md5(random()::text), $((profile_bytes / 16 + 1))), 'hex'), 1, $profile_bytes),
    substr(decode(repeat(md5(random()::text), $((key_bytes / 16 + 1))), 'hex'), 1, $key_bytes), sha256(random()::text::bytea),
    sha256(random()::text::bytea), 'pending', 1, 0, t, t, t, t + 2592000000, t
FROM (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS t) AS now, generate_series(1, $batch) AS g;
INSERT INTO floor_audit_event (seq, at, type, escrow_id, index_prefix, actor, hash, encoding)
SELECT :seq - $batch + g, (extract(epoch FROM clock_timestamp()) * 1000)::bigint, 'captured', md5(random()::text),
    substr(md5(random()::text), 1, 16), 'http:load', sha256(random()::text::bytea), 3
FROM generate_series(1, $batch) AS g;
COMMIT;
SQL
cat > "$work/replay.sql" <<SQL
BEGIN;
WITH claimed AS (
    UPDATE floor_escrow SET state = 'leased', revision = revision + 1, lease_owner = 'floor',
        lease_expires_at = due_at + 30000, due_at = due_at + 30000
    WHERE id IN (SELECT id FROM floor_escrow WHERE due_at <= (extract(epoch FROM clock_timestamp()) * 1000)::bigint
                 AND state = 'pending' ORDER BY due_at LIMIT $batch FOR UPDATE SKIP LOCKED)
    RETURNING row_id
)
SELECT COALESCE(string_agg(row_id::text, ','), '') AS claimed FROM claimed \gset
COMMIT;
BEGIN;
UPDATE floor_audit_head SET seq = seq + $batch, hash = sha256(hash) WHERE singleton = 1 RETURNING seq \gset
WITH gone AS (
    DELETE FROM floor_escrow WHERE row_id = ANY(CAST(string_to_array(:claimed, ',') AS bigint[])) RETURNING row_id
)
INSERT INTO floor_audit_event (seq, at, type, escrow_id, index_prefix, detail, http_status, actor, age_ms, hash, encoding)
SELECT :seq - $batch + row_number() OVER (), CAST(extract(epoch FROM clock_timestamp()) * 1000 AS bigint), 'purged',
    md5(CAST(row_id AS text)), substr(md5(CAST(random() AS text)), 1, 16), 'confirmed', 200, 'worker-floor', 1000,
    sha256(decode(md5(CAST(random() AS text)), 'hex')), 3
FROM gone;
COMMIT;
SQL
pgbench -n -c "$connections" -j 2 -T "$seconds" -f "$work/capture.sql" > "$work/floor-capture.txt" 2>&1 ||
    { cat "$work/floor-capture.txt"; exit 1; }
floor_rows=$(psql -c "SELECT COUNT(*) FROM floor_escrow")
per_client=$((floor_rows / connections / batch))
start=$(date +%s.%N)
pgbench -n -M extended -c "$connections" -j 2 -t "$per_client" -f "$work/replay.sql" > "$work/floor-replay.txt" 2>&1 ||
    { cat "$work/floor-replay.txt"; exit 1; }
end=$(date +%s.%N)
replayed=$((floor_rows - $(psql -c "SELECT COUNT(*) FROM floor_escrow")))
echo "floor: $floor_rows escrows captured, $replayed replayed, $batch a transaction (sealed profile $profile_bytes B, key $key_bytes B)"
python3 - "$work" "$floor_rows" "$seconds" "$replayed" "$start" "$end" <<'PY'
import sys
work, rows, seconds, replayed, start, end = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
floor = {"capture": rows / seconds, "replay": replayed / (end - start)}
print(f"floor (pgbench): {floor['capture']:.0f} captures/s, {floor['replay']:.0f} purges/s")
for nodes in (1, 2):
    capture, replay, _ = map(float, open(f"{work}/ours-{nodes}").read().split())
    print(f"{nodes} node(s) / floor: capture {capture / floor['capture']:.2f}x, replay {replay / floor['replay']:.2f}x")
PY
