#!/usr/bin/env bash
# Replay at the speed of capture, measured as a user would, in one run on one machine:
#   1. HTTP captures into a fresh store: `serve --no-worker` under wrk (`connections` connections, `seconds` s);
#   2. `replay --once --concurrency <connections>` of everything captured, to an instant loopback backend
#      (nginx answering 200 at once);
# then prints captures/s, confirmed purges/s, their ratio, and the CPU per replayed escrow.
#   Benchmarks/replay/capture-then-replay.sh [connections] [seconds]        (STRACE=1 adds `strace -c -f`;
#   PERF=1 records the replay's stacks into perf-replay.data: `perf report -i perf-replay.data`)
# Uses BIN when set (a release profile-escrow), otherwise builds one. KEYS_INIT_ARGS, when set, is added to
# `keys init` (a keyring in custody: `--custody pkcs11 …`, with the engine's credential in the environment).
# REPLAY_GLOBAL_ARGS, when set, goes before `replay` (`--log-level warning`, say).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=Benchmarks/lib/captured-store.sh
. Benchmarks/lib/captured-store.sh
connections=${1:-64}
seconds=${2:-10}
if [ -z "${BIN:-}" ]; then
    swift build -c release --product profile-escrow 2>&1 | tail -n 1
    BIN="$(swift build -c release --show-bin-path)/profile-escrow"
fi
captured_store_start
# shellcheck disable=SC2086 # KEYS_INIT_ARGS is a list of words.
captured_store_fill "$BIN" "$connections" "$seconds" ${KEYS_INIT_ARGS:-}
capture_rate=$(python3 -c "print(round($captured / $seconds))")

secret=$("$BIN" webhook-secret)
run=("$BIN" ${REPLAY_GLOBAL_ARGS:-} replay --once --concurrency "$connections" --backend http://127.0.0.1:18081/register)
start=$(date +%s.%N)
if [ "${PERF:-0}" = 1 ]; then
    # Attached to the running process (the process makes itself undumpable at start, which a child's perf does not
    # follow into its threads).
    PROFILE_ESCROW_WEBHOOK_SECRET="$secret" /usr/bin/time -f "%U %S" -o "$work/time.txt" "${run[@]}" \
        > "$work/replay.txt" &
    timed=$!
    sleep 0.3
    perf record -e cpu-clock -g -o perf-replay.data -p "$(pgrep -n -f "replay --once --concurrency $connections")" \
        >/dev/null 2>&1 &
    wait "$timed"
    wait
elif [ "${STRACE:-0}" = 1 ]; then
    PROFILE_ESCROW_WEBHOOK_SECRET="$secret" strace -c -f -o "$work/strace.txt" /usr/bin/time -f "%U %S" \
        -o "$work/time.txt" "${run[@]}" > "$work/replay.txt"
else
    PROFILE_ESCROW_WEBHOOK_SECRET="$secret" /usr/bin/time -f "%U %S" -o "$work/time.txt" "${run[@]}" \
        > "$work/replay.txt"
fi
end=$(date +%s.%N)
cat "$work/replay.txt"
python3 - "$captured" "$capture_rate" "$start" "$end" "$work/time.txt" "$serve_ticks" "$(getconf CLK_TCK)" <<'PY'
import sys
captured, capture_rate, start, end = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
serve_cpu = int(sys.argv[6]) / int(sys.argv[7])
user, system = map(float, open(sys.argv[5]).read().split()[-2:])
wall = end - start
purges = captured / wall
print(f"captured {captured} over HTTP: {capture_rate}/s")
print(f"CPU per capture: {serve_cpu / captured * 1e6:.0f} us (serve's {serve_cpu:.2f} s)")
print(f"replay --once: {captured} confirmed in {wall:.2f} s: {purges:.0f} purges/s")
print(f"ratio replay/capture: {purges / capture_rate:.2f}")
print(f"CPU per replayed escrow: {(user + system) / captured * 1e6:.0f} us ({user:.2f} s user + {system:.2f} s system)")
PY
if [ "${STRACE:-0}" = 1 ]; then
    python3 - "$captured" "$work/strace.txt" <<'PY'
import sys
captured = int(sys.argv[1])
for line in open(sys.argv[2]):
    parts = line.split()
    if len(parts) >= 5 and parts[-1] in ("fdatasync", "fsync", "pwrite64", "write", "sendmsg", "writev"):
        print(f"{parts[-1]}: {int(parts[3]) / captured:.2f} per escrow")
PY
fi
