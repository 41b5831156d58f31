#!/usr/bin/env bash
# Replay alone, two or more builds (or options) alternated on copies of one captured store: the way to tell a replay
# change from this VM's drift. Captures for SECONDS_CAPTURE seconds (default 6) through `serve --no-worker` under wrk
# with the first build, then, ROUNDS times, runs `replay --once --concurrency 64` of a fresh copy of that store with
# each build in turn, to an instant loopback backend (nginx answering 200), and prints purges/s, CPU per escrow and
# context switches per escrow.
#   Benchmarks/replay/replay-alternated.sh ROUNDS "label:/path/to/profile-escrow[:global options]" ...
# e.g. Benchmarks/replay/replay-alternated.sh 3 "before:/tmp/old/profile-escrow" "after:/tmp/new/profile-escrow" or,
# one build with and without its log lines, "info:$BIN" "warning:$BIN:--log-level warning". The builds must read the
# store the first one wrote (the same schema).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=Benchmarks/lib/captured-store.sh
. Benchmarks/lib/captured-store.sh
rounds=${1:?rounds}
shift
[ $# -ge 1 ] || { echo "usage: $0 ROUNDS label:binary[:options] ..." >&2; exit 64; }
captured_store_start
first=${1#*:}
first_bin=${first%%:*}
captured_store_fill "$first_bin" 64 "${SECONDS_CAPTURE:-6}"
echo "captured $captured escrows"
secret=$("$first_bin" webhook-secret)
for _ in $(seq 1 "$rounds"); do
    for spec in "$@"; do
        label=${spec%%:*}
        rest=${spec#*:}
        bin=${rest%%:*}
        options=""
        [ "$rest" != "$bin" ] && options=${rest#*:}
        rm -f "$work"/run.sqlite*
        cp "$work/escrow.sqlite" "$work/run.sqlite"
        for suffix in -wal -shm; do
            [ -f "$work/escrow.sqlite$suffix" ] && cp "$work/escrow.sqlite$suffix" "$work/run.sqlite$suffix"
        done
        sync
        start=$(date +%s.%N)
        # shellcheck disable=SC2086 # options is a list of words.
        PROFILE_ESCROW_DATABASE="$work/run.sqlite" PROFILE_ESCROW_WEBHOOK_SECRET="$secret" \
            /usr/bin/time -f "%U %S %c %w" -o "$work/time.txt" \
            "$bin" $options replay --once --concurrency 64 --backend http://127.0.0.1:18081/register \
            > "$work/replay.txt" 2>&1
        end=$(date +%s.%N)
        confirmed=$(grep -o '[0-9]* confirmed' "$work/replay.txt" | tail -n 1 | cut -d' ' -f1)
        python3 - "$label" "$captured" "${confirmed:-0}" "$start" "$end" "$work/time.txt" <<'PY'
import sys
label, captured, confirmed, start, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
user, system, involuntary, voluntary = map(float, open(sys.argv[6]).read().split()[-4:])
print(f"{label}: {captured / (end - start):6.0f} purges/s, {(user + system) / captured * 1e6:4.0f} us CPU an escrow, "
      f"context switches an escrow {voluntary / captured:.2f} voluntary {involuntary / captured:.2f} involuntary"
      + ("" if confirmed == captured else f"  (only {confirmed} of {captured} confirmed)"))
PY
    done
done
