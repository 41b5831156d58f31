#!/usr/bin/env bash
# Captures per second and latency percentiles of `profile-escrow serve` over loopback, with wrk.
#   Benchmarks/http/load.sh [connections] [seconds] [rate]
# Starts a release build of the service on a fresh store in a temporary directory, creates a capture
# token, runs wrk (open loop at `rate` requests/s when wrk2-style rate limiting is unavailable: wrk runs
# closed loop with `connections` connections), prints wrk's report, and stops the service.
set -euo pipefail
cd "$(dirname "$0")/../.."
connections=${1:-64}
seconds=${2:-20}
command -v wrk >/dev/null || { apt-get install -y -qq wrk >/dev/null; }
swift build -c release --product profile-escrow 2>&1 | tail -n 1
bin="$(swift build -c release --show-bin-path)/profile-escrow"
work=$(mktemp -d)
export PROFILE_ESCROW_DATABASE="$work/escrow.sqlite" PROFILE_ESCROW_KEYRING="$work/keyring"
"$bin" keys init >/dev/null
token=$("$bin" tokens add load --scope capture | tail -n 1)
"$bin" serve --host 127.0.0.1 --port 18080 --no-worker --rate-limit 1000000 --rate-burst 1000000 > "$work/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 50); do curl -fs http://127.0.0.1:18080/healthz >/dev/null && break; sleep 0.2; done
TOKEN="$token" wrk -t2 -c"$connections" -d"${seconds}s" --latency -s Benchmarks/http/capture.lua http://127.0.0.1:18080
"$bin" purge-report --format json | grep -E '"captured"'
