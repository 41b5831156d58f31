# Sourced by the replay benchmarks, from the repository's root: a scratch folder with an instant backend, and a store
# filled by HTTP captures.
#   captured_store_start                   work (the folder), serve_pid; PROFILE_ESCROW_DATABASE, _KEYRING set; the
#                                          backend on 127.0.0.1:18081; everything stopped and removed at exit
#   captured_store_fill BIN CONNECTIONS SECONDS [KEYS_INIT_ARGS...]
#                                          keys init, then `serve --no-worker` under wrk for SECONDS; sets captured
#                                          (escrows stored) and serve_ticks (serve's CPU, user + system clock ticks)
# shellcheck source=Benchmarks/lib/instant-backend.sh
. Benchmarks/lib/instant-backend.sh
command -v wrk >/dev/null || apt-get install -y -qq wrk >/dev/null

captured_store_start() {
    work=$(mktemp -d)
    chmod 755 "$work"
    export PROFILE_ESCROW_DATABASE="$work/escrow.sqlite" PROFILE_ESCROW_KEYRING="$work/keyring"
    serve_pid=""
    trap captured_store_cleanup EXIT
    instant_backend_start "$work" 18081
}

captured_store_cleanup() {
    [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
    instant_backend_stop "$work"
    rm -rf "$work"
}

captured_store_fill() {
    local bin=$1 connections=$2 seconds=$3 token
    shift 3
    "$bin" keys init "$@" >/dev/null
    token=$("$bin" tokens add load --scope capture 2>/dev/null | tail -n 1)
    "$bin" serve --host 127.0.0.1 --port 18080 --no-worker --rate-limit 1000000 --rate-burst 1000000 \
        > "$work/serve.log" 2>&1 &
    serve_pid=$!
    for _ in $(seq 1 50); do curl -fs http://127.0.0.1:18080/healthz >/dev/null && break; sleep 0.2; done
    TOKEN="$token" wrk -t2 -c"$connections" -d"${seconds}s" -s Benchmarks/http/capture.lua http://127.0.0.1:18080 \
        > "$work/wrk.txt"
    # serve's CPU time over its whole run: what the captures cost, whatever else ran.
    serve_ticks=$(awk '{print $14 + $15}' "/proc/$serve_pid/stat")
    kill "$serve_pid"
    wait "$serve_pid" 2>/dev/null || true
    serve_pid=""
    captured=$("$bin" purge-report --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["captured"])')
}
