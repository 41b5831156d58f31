#!/usr/bin/env bash
# Property-based tests of the HTTP API against docs/openapi.yaml with Schemathesis (from PyPI, installed here in
# .venv-st/ when missing): a temporary store with a few escrows, `serve --no-worker` on a free port, a token with every
# scope, and every check (status codes, content types, schemas, negative data, stateful links).
#
#   PROFILE_ESCROW_BIN=.build/debug/profile-escrow scripts/schemathesis.sh                # the admin API
#   PATHS='^/v1/' scripts/schemathesis.sh --max-examples 200 --seed 1                   # every /v1 route
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-st
[ -x "$venv/bin/schemathesis" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q schemathesis; }
bin=${PROFILE_ESCROW_BIN:-.build/debug/profile-escrow}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
dir=$(mktemp -d)
pid=
cleanup() {
    [ -z "$pid" ] || { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
    rm -rf "$dir"
}
trap cleanup EXIT
export PROFILE_ESCROW_DATABASE="$dir/escrow.sqlite" PROFILE_ESCROW_KEYRING="$dir/keyring"
export PROFILE_ESCROW_TOKENS="$dir/tokens.sqlite" PROFILE_ESCROW_LOG_LEVEL=warning
"$bin" keys init >/dev/null 2>&1
for n in 1 2 3 4 5; do
    printf '{"userIdentifier":"000000.schemathesis%d.0001","email":"st%d@example.invalid"}' "$n" "$n" \
        | "$bin" capture >/dev/null 2>&1
done
token=$("$bin" tokens add schemathesis --scope capture read replay confirm erase metrics signin operate audit 2>/dev/null)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" serve --no-worker --host 127.0.0.1 --port "$port" --rate-limit 100000 --rate-burst 100000 >"$dir/serve.log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
timeout 900 "$venv/bin/schemathesis" run docs/openapi.yaml --url "http://127.0.0.1:$port" \
    -H "Authorization: Bearer $token" --include-path-regex "${PATHS:-^/v1/admin}" --checks all \
    --max-examples 100 "$@"
