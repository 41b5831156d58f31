#!/usr/bin/env bash
# A soak: `serve` with its replay worker under a steady load for `minutes`, capturing over HTTP and delivering every
# escrow to an instant loopback backend (nginx answering 200), as a node does all day.
#   Benchmarks/soak/soak.sh [minutes] [captures-per-second] [connections]        (BIN=<release profile-escrow>)
# Samples serve's resident memory and open files every 10 s, prints wrk's latency percentiles (p99 among them), then
# waits for the last deliveries and says what the store still holds: no escrow may be left, only the audit trail.
# Flat means: after the first minute, resident memory grows by less than 1% of its size a minute, and once the load
# has stopped serve holds no more open files than it did under it.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=Benchmarks/lib/instant-backend.sh
. Benchmarks/lib/instant-backend.sh
minutes=${1:-10}
rate=${2:-300}
connections=${3:-16}
command -v wrk >/dev/null || apt-get install -y -qq wrk >/dev/null
if [ -z "${BIN:-}" ]; then
    swift build -c release --product profile-escrow 2>&1 | tail -n 1
    BIN="$(swift build -c release --show-bin-path)/profile-escrow"
fi
work=$(mktemp -d)
chmod 755 "$work"
export PROFILE_ESCROW_DATABASE="$work/store/escrow.sqlite" PROFILE_ESCROW_KEYRING="$work/store/keyring"
mkdir -m 700 "$work/store"
instant_backend_start "$work" 18091
serve_pid=""
sampler_pid=""
cleanup() {
    [ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null
    [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
    instant_backend_stop "$work"
    rm -rf "$work"
}
trap cleanup EXIT

"$BIN" keys init >/dev/null
token=$("$BIN" tokens add soak --scope capture | tail -n 1)
PROFILE_ESCROW_WEBHOOK_SECRET=$("$BIN" webhook-secret) "$BIN" serve --host 127.0.0.1 --port 18090 \
    --backend http://127.0.0.1:18091/register --rate-limit 1000000 --rate-burst 1000000 > "$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 1 50); do curl -fs http://127.0.0.1:18090/healthz >/dev/null && break; sleep 0.2; done

# Every 10 s: seconds since start, resident KiB, open files.
(
    start=$(date +%s)
    while kill -0 "$serve_pid" 2>/dev/null; do
        rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$serve_pid/status")
        fds=$(find "/proc/$serve_pid/fd" -mindepth 1 -maxdepth 1 | wc -l)
        echo "$(($(date +%s) - start)) $rss $fds" >> "$work/samples"
        sleep 10
    done
) &
sampler_pid=$!

delay_ms=$((connections * 1000 / rate))
DELAY_MS=$delay_ms TOKEN="$token" wrk -t2 -c"$connections" -d"${minutes}m" --latency \
    -s Benchmarks/http/capture.lua http://127.0.0.1:18090 > "$work/wrk.txt"
cat "$work/wrk.txt"

# The load has stopped: the worker delivers what is left (bounded: two minutes).
live=""
for _ in $(seq 1 120); do
    live=$("$BIN" purge-report --format json | python3 -c 'import json,sys; print(sum(json.load(sys.stdin)["live"].values()))')
    [ "$live" = 0 ] && break
    sleep 1
done
sleep 12  # one more sample after the drain
kill "$sampler_pid" 2>/dev/null; sampler_pid=""
kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true; serve_pid=""

python3 - "$work/samples" "$live" "$work/store" "$minutes" "$rate" <<'PY'
import os, sqlite3, sys
samples = [tuple(map(int, line.split())) for line in open(sys.argv[1]) if line.strip()]
live, store, minutes, rate = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
print(f"\nsoak: {minutes} min at {rate} captures/s, {len(samples)} samples of serve every 10 s")
steady = [s for s in samples if s[0] >= 60] or samples
n = len(steady)
mean_t = sum(s[0] for s in steady) / n
mean_r = sum(s[1] for s in steady) / n
slope = sum((s[0] - mean_t) * (s[1] - mean_r) for s in steady) / max(1e-9, sum((s[0] - mean_t) ** 2 for s in steady))
per_minute = slope * 60
print(f"resident memory after the first minute: {steady[0][1] / 1024:.1f} MiB at {steady[0][0]} s, "
      f"{steady[-1][1] / 1024:.1f} MiB at {steady[-1][0]} s, max {max(s[1] for s in steady) / 1024:.1f} MiB; "
      f"trend {per_minute / 1024:+.2f} MiB a minute ({per_minute / mean_r * 100:+.2f}% of its mean)")
print(f"open files: first {samples[0][2]}, min {min(s[2] for s in samples)}, max {max(s[2] for s in samples)}, "
      f"last {samples[-1][2]}")
# Open files: after the load, no more than while it ran (its connections closed; none leaked).
flat = abs(per_minute / mean_r) < 0.01 and samples[-1][2] <= steady[0][2]
print("flat:", "yes" if flat else "NO")
print(f"live escrows after the drain: {live}")
db = sqlite3.connect(os.path.join(store, "escrow.sqlite"))
tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
left = {t: db.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in tables}
print("rows left:", ", ".join(f"{t} {c}" for t, c in left.items() if c))
print("files:", ", ".join(f"{f} {os.path.getsize(os.path.join(store, f))} B" for f in sorted(os.listdir(store))))
PY
