#!/usr/bin/env bash
# HTTP capture beside the crypto ceiling, in one run: the ceiling (a key pair and two sealed boxes on every core,
# nothing else; Benchmarks/http/ceiling.c), then `serve --no-worker` under wrk (`connections`, `seconds`), then the
# ceiling again; prints captures/s, the ceiling (mean of the two) and the ratio.
#   Benchmarks/http/capture-vs-ceiling.sh [connections] [seconds]      (BIN=<release profile-escrow> skips the build)
set -euo pipefail
cd "$(dirname "$0")/../.."
connections=${1:-64}
seconds=${2:-10}
source Benchmarks/http/capture-node.sh
release_binary
work=$(mktemp -d)
trap 'stop_capture_node; rm -rf "$work"' EXIT
gcc -O2 -o "$work/ceiling" Benchmarks/http/ceiling.c -lsodium -lpthread
before=$("$work/ceiling" "$seconds")
start_capture_node "$work"
TOKEN="$node_token" wrk -t2 -c"$connections" -d"${seconds}s" -s Benchmarks/http/capture.lua \
    "http://127.0.0.1:$node_port" >"$work/wrk.txt"
stop_capture_node
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
