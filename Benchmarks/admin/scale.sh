#!/usr/bin/env bash
# The admin API at scale: for each size (default 1,000 and 1,000,000 escrows) a SQLite store is filled in the store's
# real row format (Benchmarks/admin/fill.sql: one escrow captured by the CLI, copied with fresh ids and blind
# indexes), `serve --no-worker` answers the admin API over it, and Benchmarks/admin/bench.py times each answer (list
# first page, a deep page by cursor, the same within state=dead, one escrow with its history, the overview) against
# the same SQL run raw on the same file, with each query's plan. One JSON line an answer.
#
#   Benchmarks/admin/scale.sh                 # 1000 and 1000000
#   SIZES="1000 100000" REPEAT=500 Benchmarks/admin/scale.sh
#   PROFILE_ESCROW_BIN=.build/debug/profile-escrow Benchmarks/admin/scale.sh
#
# Everything goes to a temporary folder (ADMIN_BENCH_DIR to choose one), removed at the end unless KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${PROFILE_ESCROW_BIN:-.build/release/profile-escrow}
[ -x "$bin" ] || bin=.build/debug/profile-escrow
[ -x "$bin" ] || { echo "no profile-escrow binary: swift build -c release --product profile-escrow" >&2; exit 2; }
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
root=${ADMIN_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$root"
serve_pid=
cleanup() {
    [ -z "$serve_pid" ] || { kill "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; }
    [ "${KEEP:-0}" = 1 ] || rm -rf "$root"
}
trap cleanup EXIT
echo "binary: $bin; folder: $root" >&2

for n in ${SIZES:-1000 1000000}; do
    dir="$root/$n"
    mkdir -p "$dir"
    export PROFILE_ESCROW_DATABASE="$dir/escrow.sqlite" PROFILE_ESCROW_KEYRING="$dir/keyring"
    export PROFILE_ESCROW_TOKENS="$dir/tokens.sqlite" PROFILE_ESCROW_LOG_LEVEL=warning
    "$bin" keys init >/dev/null 2>&1
    echo '{"userIdentifier":"000000.benchtemplate.0001","email":"bench@example.invalid"}' | "$bin" capture >/dev/null
    start=$(date +%s.%N)
    sqlite3 "$dir/escrow.sqlite" ".param set :n $n" ".read Benchmarks/admin/fill.sql" >/dev/null
    fill=$(printf "%.3f" "$(echo "$(date +%s.%N) - $start" | bc)")
    echo "{\"escrows\": $n, \"fill_seconds\": $fill, \"store_bytes\": $(stat -c %s "$dir/escrow.sqlite")}"
    token=$("$bin" tokens add bench --scope read 2>/dev/null)
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$bin" serve --no-worker --host 127.0.0.1 --port "$port" --rate-limit 100000 --rate-burst 100000 \
        >"$dir/serve.log" 2>&1 &
    serve_pid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
    python3 Benchmarks/admin/bench.py "$dir/escrow.sqlite" "http://127.0.0.1:$port" "$token" "${REPEAT:-200}"
    kill "$serve_pid"
    wait "$serve_pid" 2>/dev/null || true
    serve_pid=
    [ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
done
