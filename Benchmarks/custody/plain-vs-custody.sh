#!/usr/bin/env bash
# Capture and replay as whole processes with a plain keyring and with keyrings in custody, in one run on one
# machine, alternated (plain, pkcs11, transit, then again) so that a drift of the machine shows as noise between the
# rounds and not as a cost of custody:
#   Benchmarks/custody/plain-vs-custody.sh [connections] [seconds] [rounds]
# Each round is Benchmarks/replay/capture-then-replay.sh: `serve --no-worker` under wrk, then `replay --once` of
# everything captured to an instant loopback backend. Starts a SoftHSM2 token and an OpenBao server
# (scripts/softhsm.sh, scripts/openbao.sh) and stops them. Uses BIN when set (a release profile-escrow).
set -euo pipefail
cd "$(dirname "$0")/../.."
connections=${1:-64}
seconds=${2:-10}
rounds=${3:-2}
if [ -z "${BIN:-}" ]; then
    swift build -c release --product profile-escrow 2>&1 | tail -n 1
    BIN="$(swift build -c release --show-bin-path)/profile-escrow"
fi
export BIN
trap 'scripts/softhsm.sh stop >/dev/null 2>&1; scripts/openbao.sh stop >/dev/null 2>&1' EXIT
eval "$(scripts/softhsm.sh start)"
eval "$(scripts/openbao.sh start)"
export PROFILE_ESCROW_PKCS11_PIN=$PROFILE_ESCROW_TEST_PKCS11_PIN
export PROFILE_ESCROW_TRANSIT_TOKEN=$PROFILE_ESCROW_TEST_BAO_TOKEN
declare -A init_args=(
    [plain]=""
    [pkcs11]="--custody pkcs11 --pkcs11-module $PROFILE_ESCROW_TEST_PKCS11_MODULE --pkcs11-token $PROFILE_ESCROW_TEST_PKCS11_TOKEN --pkcs11-key bench-$$"
    [transit]="--custody transit --transit-address $PROFILE_ESCROW_TEST_BAO_ADDR --transit-key $PROFILE_ESCROW_TEST_BAO_KEY"
)
results=$(mktemp)
for round in $(seq 1 "$rounds"); do
    for kind in plain pkcs11 transit; do
        # The processes' own logs (a line per purge) go to a file, shown only when a round fails.
        if ! out=$(KEYS_INIT_ARGS="${init_args[$kind]}" Benchmarks/replay/capture-then-replay.sh "$connections" \
            "$seconds" 2>"$results.log"); then
            cat "$results.log" >&2
            exit 1
        fi
        capture=$(sed -n 's/^captured [0-9]* over HTTP: \([0-9]*\)\/s$/\1/p' <<<"$out")
        replay=$(sed -n 's/^replay --once: .*: \([0-9]*\) purges\/s$/\1/p' <<<"$out")
        cpu=$(sed -n 's/^CPU per replayed escrow: \([0-9]*\) us.*/\1/p' <<<"$out")
        capture_cpu=$(sed -n 's/^CPU per capture: \([0-9]*\) us.*/\1/p' <<<"$out")
        echo "round $round $kind: capture $capture/s ($capture_cpu us CPU each), replay $replay purges/s ($cpu us CPU each)"
        echo "$kind $capture $replay $cpu $capture_cpu" >>"$results"
    done
done
python3 - "$results" <<'PY'
import sys, statistics
rows = [line.split() for line in open(sys.argv[1])]
by = {}
for kind, capture, replay, cpu, capture_cpu in rows:
    by.setdefault(kind, []).append((int(capture), int(replay), int(cpu), int(capture_cpu)))
plain = [statistics.mean(column) for column in zip(*by["plain"])]
# Throughput swings with whatever else the machine runs; CPU per escrow much less: both are shown.
for kind in ("plain", "pkcs11", "transit"):
    mean = [statistics.mean(column) for column in zip(*by[kind])]
    print(f"{kind:8s} capture {mean[0]:6.0f}/s ({mean[0] / plain[0]:.2f}x), CPU {mean[3]:4.0f} us "
          f"({mean[3] / plain[3]:.2f}x)   replay {mean[1]:6.0f}/s ({mean[1] / plain[1]:.2f}x), "
          f"CPU {mean[2]:4.0f} us ({mean[2] / plain[2]:.2f}x)")
PY
rm -f "$results" "$results.log"
