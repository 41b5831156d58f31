#!/usr/bin/env bash
# HTTP capture beside the crypto ceiling, in one run: the ceiling (a key pair and two sealed boxes on every core,
# nothing else; Benchmarks/http/ceiling.c), then `serve --no-worker` under wrk (`connections`, `seconds`), then the
# ceiling again; prints captures/s, the ceiling (mean of the two) and the ratio.
#   Benchmarks/http/capture-vs-ceiling.sh [connections] [seconds]      (BIN=<release profile-escrow> skips the build)
set -euo pipefail
cd "$(dirname "$0")/../.."
connections=${1:-64}
seconds=${2:-10}
command -v wrk >/dev/null || apt-get install -y -qq wrk >/dev/null
if [ -z "${BIN:-}" ]; then
    swift build -c release --product profile-escrow 2>&1 | tail -n 1
    BIN="$(swift build -c release --show-bin-path)/profile-escrow"
fi
work=$(mktemp -d)
gcc -O2 -o "$work/ceiling" Benchmarks/http/ceiling.c -lsodium -lpthread
export PROFILE_ESCROW_DATABASE="$work/escrow.sqlite" PROFILE_ESCROW_KEYRING="$work/keyring"
"$BIN" keys init >/dev/null
token=$("$BIN" tokens add load --scope capture | tail -n 1)
before=$("$work/ceiling" "$seconds")
"$BIN" serve --host 127.0.0.1 --port 18080 --no-worker --rate-limit 1000000 --rate-burst 1000000 > "$work/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 50); do curl -fs http://127.0.0.1:18080/healthz >/dev/null && break; sleep 0.2; done
TOKEN="$token" wrk -t2 -c"$connections" -d"${seconds}s" -s Benchmarks/http/capture.lua http://127.0.0.1:18080 > "$work/wrk.txt"
kill "$pid"; wait "$pid" 2>/dev/null || true
after=$("$work/ceiling" "$seconds")
captured=$("$BIN" purge-report --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["captured"])')
python3 - "$captured" "$seconds" "$before" "$after" <<'PY'
import sys
captured, seconds, before, after = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
rate, ceiling = captured / seconds, (before + after) / 2
print(f"HTTP captures: {rate:.0f}/s ({captured} in {seconds:.0f} s, wrk on the same cores)")
print(f"crypto ceiling: {ceiling:.0f}/s (before {before:.0f}, after {after:.0f})")
print(f"ratio: {rate / ceiling:.2f}")
PY
