# Sourced by the admin benchmarks (scale.sh, purge-report.sh): the binary, a temporary folder removed at the end
# unless KEEP=1 (ADMIN_BENCH_DIR to choose one), a store filled in the store's real row format, and `serve --no-worker`
# over it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
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

# fill_store N DIR: a store in DIR (its variables exported for the CLI) with N escrows copied from one captured by the
# CLI (Benchmarks/admin/fill.sql); sets `fill_seconds`.
fill_store() {
    local n=$1 dir=$2
    mkdir -p "$dir"
    export PROFILE_ESCROW_DATABASE="$dir/escrow.sqlite" PROFILE_ESCROW_KEYRING="$dir/keyring"
    export PROFILE_ESCROW_TOKENS="$dir/tokens.sqlite" PROFILE_ESCROW_LOG_LEVEL=warning
    "$bin" keys init >/dev/null 2>&1
    echo '{"userIdentifier":"000000.benchtemplate.0001","email":"bench@example.invalid"}' | "$bin" capture >/dev/null
    local start
    start=$(date +%s.%N)
    sqlite3 "$dir/escrow.sqlite" ".param set :n $n" ".read Benchmarks/admin/fill.sql" >/dev/null
    fill_seconds=$(printf "%.3f" "$(echo "$(date +%s.%N) - $start" | bc)")
}

# start_serve DIR: `serve --no-worker` on a free port over the store exported, its rate limit out of the way; sets
# `port` and `serve_pid` once /healthz answers.
start_serve() {
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$bin" serve --no-worker --host 127.0.0.1 --port "$port" --rate-limit 100000 --rate-burst 100000 \
        >"$1/serve.log" 2>&1 &
    serve_pid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
}

# stop_serve DIR: stops it and removes DIR unless KEEP=1.
stop_serve() {
    kill "$serve_pid"
    wait "$serve_pid" 2>/dev/null || true
    serve_pid=
    [ "${KEEP:-0}" = 1 ] || rm -rf "$1"
}
